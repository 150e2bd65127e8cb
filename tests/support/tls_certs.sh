#!/bin/sh
# SPDX-License-Identifier: MIT
# Makes the TLS test certificates in DIR with the openssl command (tests/support/tls_certs.c runs it):
#   ca.pem              the CA the tests trust
#   server.pem/.key     the server, signed by ca.pem, for 127.0.0.1, ::1 and localhost
#   client.pem/.key     a client certificate signed by ca.pem (mTLS)
#   other-ca.pem        another CA; other-server.pem/.key: 127.0.0.1 signed by it
#   wrong-name.pem/.key signed by ca.pem for another name (other.example) only
#   expired.pem/.key    signed by ca.pem for 127.0.0.1, valid in 2020 only
# EC P-256 keys: made in milliseconds, where RSA takes a noticeable time.
set -eu
cd "$1"
KEY="-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"

ca() { # NAME CN
    openssl req -x509 $KEY -keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=$2" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
        2>/dev/null
}
leaf() { # NAME CA CN SAN EXTENDED_KEY_USAGE
    openssl req -x509 $KEY -keyout "$1.key" -out "$1.pem" -days 2 -subj "/CN=$3" \
        -CA "$2.pem" -CAkey "$2.key" -addext "subjectAltName=$4" \
        -addext basicConstraints=CA:FALSE -addext "extendedKeyUsage=$5" 2>/dev/null
}

ca ca "sluice test CA"
ca other-ca "another CA"
leaf server ca localhost "IP:127.0.0.1,IP:::1,DNS:localhost" serverAuth
leaf client ca "sluice test client" "DNS:client.example" clientAuth
leaf other-server other-ca localhost "IP:127.0.0.1,DNS:localhost" serverAuth
leaf wrong-name ca other.example "DNS:other.example" serverAuth

# expired: `openssl x509 -days` cannot go back in time, `openssl ca` takes the dates
openssl req -new $KEY -keyout expired.key -out expired.csr -subj "/CN=localhost" 2>/dev/null
mkdir -p ca.db
: >ca.db/index.txt
cat >ca.db/ca.cnf <<EOF
[ca]
default_ca = test
[test]
database = ca.db/index.txt
new_certs_dir = ca.db
serial = ca.db/serial
default_md = sha256
policy = any
copy_extensions = none
x509_extensions = leaf
[any]
commonName = supplied
[leaf]
basicConstraints = CA:FALSE
subjectAltName = IP:127.0.0.1,IP:::1,DNS:localhost
extendedKeyUsage = serverAuth
EOF
echo 01 >ca.db/serial
openssl ca -batch -config ca.db/ca.cnf -cert ca.pem -keyfile ca.key -in expired.csr \
    -out expired.pem -startdate 20200101000000Z -enddate 20200102000000Z -notext 2>/dev/null
rm -rf ca.db expired.csr
chmod 600 ./*.key
