/* SPDX-License-Identifier: MIT */
/* Reads the records of RATE_LIMITED* uses from an ELF file, without running or relocating it. */
#include "sites.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glib/gstdio.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#define SECTION    "sluice_sites"
#define RECORD_TAG "sluice-site/1"

typedef struct {
    const char *path;
    const guint8 *data;
    gsize size;
    gboolean is64;
    gboolean big_endian;
} elf_file;

/* The fields of a section header that matter here, in either class. */
typedef struct {
    guint64 name, type, offset, size, link;
} section;

void cli_site_free(cli_site *site)
{
    g_free(site->name);
    g_free(site->spelling);
    g_free(site->file);
    g_free(site->function);
    g_free(site);
}

static gboolean in_file(const elf_file *f, guint64 offset, guint64 size)
{
    return offset <= f->size && size <= f->size - offset;
}

/* The unsigned integer of width bytes at offset, in the file's byte order. */
static guint64 get(const elf_file *f, guint64 offset, gsize width)
{
    guint64 v = 0;
    for (gsize i = 0; i < width; i++)
        v = v << 8 | f->data[offset + (f->big_endian ? i : width - 1 - i)];
    return v;
}

#define FIELD(f, at, type, member)                                                                 \
    get((f), (at) + offsetof(type, member), sizeof(((type *)0)->member))
/* member of the file's class of Elf32_KIND / Elf64_KIND at offset at */
#define FIELD_N(f, at, kind, member)                                                               \
    ((f)->is64 ? FIELD(f, at, Elf64_##kind, member) : FIELD(f, at, Elf32_##kind, member))

static section section_at(const elf_file *f, guint64 at)
{
    return (section){FIELD_N(f, at, Shdr, sh_name), FIELD_N(f, at, Shdr, sh_type),
                     FIELD_N(f, at, Shdr, sh_offset), FIELD_N(f, at, Shdr, sh_size),
                     FIELD_N(f, at, Shdr, sh_link)};
}

static gboolean malformed(const elf_file *f, GError **error, const char *what)
{
    g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL, "%s: not a valid ELF file: %s", f->path,
                what);
    return FALSE;
}

/* The next NUL-terminated string of data from *pos, or NULL when none ends before size. */
static const char *take(const guint8 *data, gsize size, gsize *pos)
{
    const guint8 *end = *pos < size ? memchr(data + *pos, 0, size - *pos) : NULL;
    if (!end)
        return NULL;
    const char *s = (const char *)data + *pos;
    *pos = (gsize)(end - data) + 1;
    return s;
}

/* The records of one sluice_sites section: RECORD_TAG, spelling, file, line, function,
 * each NUL-terminated; the compiler may pad between records with NULs. */
static gboolean read_records(const elf_file *f, const guint8 *data, gsize size, GPtrArray *sites,
                             GError **error)
{
    gsize pos = 0;
    while (pos < size) {
        if (data[pos] == 0) {
            pos++;
            continue;
        }
        gsize start = pos;
        const char *field[5];
        for (guint i = 0; i < G_N_ELEMENTS(field); i++)
            if (!(field[i] = take(data, size, &pos)))
                return malformed(f, error, "a record of its section " SECTION " is cut short");
        guint64 line;
        if (strcmp(field[0], RECORD_TAG) != 0) {
            g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                        "%s: section " SECTION " holds a record this sluice does not know "
                        "(offset %" G_GSIZE_FORMAT "): built with another version of sluice?",
                        f->path, start);
            return FALSE;
        }
        if (!g_ascii_string_to_unsigned(field[3], 10, 1, G_MAXINT, &line, NULL))
            return malformed(f, error, "a record of its section " SECTION " has no line number");
        cli_site *site = g_new0(cli_site, 1);
        site->spelling = g_strdup(field[1]);
        site->name = cli_site_literal(site->spelling);
        site->file = g_strdup(field[2]);
        site->line = (int)line;
        site->function = *field[4] ? g_strdup(field[4]) : NULL;
        g_ptr_array_add(sites, site);
    }
    return TRUE;
}

gboolean cli_sites_read(const char *path, GPtrArray *sites, GError **error)
{
    int fd = g_open(path, O_RDONLY, 0);
    if (fd < 0) {
        int errsv = errno;
        g_set_error(error, G_FILE_ERROR, g_file_error_from_errno(errsv), "%s: %s", path,
                    g_strerror(errsv));
        return FALSE;
    }
    g_autoptr(GMappedFile) mapped = g_mapped_file_new_from_fd(fd, FALSE, error);
    close(fd);
    if (!mapped)
        return FALSE;
    elf_file file = {path, (const guint8 *)g_mapped_file_get_contents(mapped),
                     g_mapped_file_get_length(mapped), FALSE, FALSE};
    elf_file *f = &file;
    if (f->size < EI_NIDENT || memcmp(f->data, ELFMAG, SELFMAG) != 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: not an ELF file (a program, shared library or object)", path);
        return FALSE;
    }
    if (f->data[EI_CLASS] != ELFCLASS32 && f->data[EI_CLASS] != ELFCLASS64)
        return malformed(f, error, "unknown class");
    if (f->data[EI_DATA] != ELFDATA2LSB && f->data[EI_DATA] != ELFDATA2MSB)
        return malformed(f, error, "unknown byte order");
    f->is64 = f->data[EI_CLASS] == ELFCLASS64;
    f->big_endian = f->data[EI_DATA] == ELFDATA2MSB;
    if (f->size < (f->is64 ? sizeof(Elf64_Ehdr) : sizeof(Elf32_Ehdr)))
        return malformed(f, error, "cut short");

    guint64 shoff = FIELD_N(f, 0, Ehdr, e_shoff);
    guint64 shentsize = FIELD_N(f, 0, Ehdr, e_shentsize);
    guint64 shnum = FIELD_N(f, 0, Ehdr, e_shnum);
    guint64 shstrndx = FIELD_N(f, 0, Ehdr, e_shstrndx);
    if (shoff == 0) {
        g_set_error(error, G_FILE_ERROR, G_FILE_ERROR_INVAL,
                    "%s: has no section headers, so no section " SECTION " can be found", path);
        return FALSE;
    }
    if (shentsize < (f->is64 ? sizeof(Elf64_Shdr) : sizeof(Elf32_Shdr)) ||
        !in_file(f, shoff, shentsize))
        return malformed(f, error, "bad section headers");
    section first = section_at(f, shoff);
    if (shnum == 0) /* 65280 sections or more: the count is in section 0 */
        shnum = first.size;
    if (shstrndx == SHN_XINDEX)
        shstrndx = first.link;
    if (shnum > f->size / shentsize || !in_file(f, shoff, shnum * shentsize) || shstrndx >= shnum)
        return malformed(f, error, "bad section headers");
    section names = section_at(f, shoff + shstrndx * shentsize);
    if (names.type == SHT_NOBITS || !in_file(f, names.offset, names.size))
        return malformed(f, error, "bad section name table");

    for (guint64 i = 1; i < shnum; i++) {
        section s = section_at(f, shoff + i * shentsize);
        if (s.name >= names.size || names.size - s.name < sizeof(SECTION) ||
            memcmp(f->data + names.offset + s.name, SECTION, sizeof(SECTION)) != 0 ||
            s.type == SHT_NOBITS)
            continue;
        if (!in_file(f, s.offset, s.size))
            return malformed(f, error, "section " SECTION " lies beyond the end of the file");
        if (!read_records(f, f->data + s.offset, s.size, sites, error))
            return FALSE;
    }
    return TRUE;
}

static int hex_value(char c)
{
    return g_ascii_isxdigit(c) ? g_ascii_xdigit_value(c) : -1;
}

/* Appends the character of the escape sequence after the backslash at *p (C11
 * 6.4.4.4, and GCC's \e) and moves *p past it; FALSE when it is not one. */
static gboolean unescape(const char **p, const char *end, GString *out)
{
    static const char simple[] = "n\nt\tr\ra\ab\bf\fv\v\\\\''\"\"??e\033E\033";
    char c = *(*p)++;
    for (const char *s = simple; *s; s += 2)
        if (s[0] == c) {
            g_string_append_c(out, s[1]);
            return TRUE;
        }
    guint32 v = 0;
    if (c >= '0' && c <= '7') { /* one to three octal digits */
        v = (guint32)(c - '0');
        for (int n = 1; n < 3 && *p < end && **p >= '0' && **p <= '7'; n++)
            v = v * 8 + (guint32)(*(*p)++ - '0');
        g_string_append_c(out, (char)(v & 0xff));
        return v <= 0xff;
    }
    if (c == 'x') { /* any number of hex digits, one byte */
        const char *digits = *p;
        for (; *p < end && hex_value(**p) >= 0 && v <= 0xff; (*p)++)
            v = v * 16 + (guint32)hex_value(**p);
        g_string_append_c(out, (char)v);
        return *p > digits && v <= 0xff;
    }
    if (c == 'u' || c == 'U') { /* a universal character name, encoded as UTF-8 */
        int n = c == 'u' ? 4 : 8;
        for (int i = 0; i < n; i++, (*p)++) {
            if (*p >= end || hex_value(**p) < 0)
                return FALSE;
            v = v * 16 + (guint32)hex_value(**p);
        }
        if (!g_unichar_validate(v))
            return FALSE;
        char utf8[6];
        g_string_append_len(out, utf8, g_unichar_to_utf8(v, utf8));
        return TRUE;
    }
    return FALSE;
}

char *cli_site_literal(const char *spelling)
{
    const char *p = spelling, *end = spelling + strlen(spelling);
    for (;;) { /* white space and enclosing parentheses */
        while (p < end && g_ascii_isspace(*p))
            p++;
        while (end > p && g_ascii_isspace(end[-1]))
            end--;
        if (end - p < 2 || *p != '(' || end[-1] != ')')
            break;
        p++;
        end--;
    }
    g_autoptr(GString) out = g_string_new(NULL);
    gboolean any = FALSE;
    while (p < end) {
        if (g_ascii_isspace(*p)) {
            p++;
            continue;
        }
        if (end - p > 2 && p[0] == 'u' && p[1] == '8')
            p += 2;
        if (*p++ != '"')
            return NULL;
        while (p < end && *p != '"')
            if (*p != '\\')
                g_string_append_c(out, *p++);
            else if (++p >= end || !unescape(&p, end, out))
                return NULL;
        if (p++ >= end) /* no closing quote */
            return NULL;
        any = TRUE;
    }
    return any ? g_strdup(out->str) : NULL; /* up to the first NUL, as C reads it */
}
