/* The GError domain of sluice and the messages of its codes, from one table. */
#include <sluice/error.h>

G_DEFINE_QUARK(sluice - error - quark, sluice_error)

const char *sluice_strerror(sluice_error_code code)
{
    switch (code) {
#define SLUICE__ERROR_CASE(code, message)                                                          \
    case code:                                                                                     \
        return message;
        SLUICE_ERROR_TABLE(SLUICE__ERROR_CASE)
#undef SLUICE__ERROR_CASE
    }
    return "unknown error";
}
