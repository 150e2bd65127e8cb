/* SPDX-License-Identifier: MIT */
/** @file
 * The decorators: RATE_LIMITED guards, RATE_LIMITED_FUNCTION definitions. */
#ifndef SLUICE_MACROS_H
#define SLUICE_MACROS_H

/** Keeps -Wpedantic quiet about __VA_OPT__ in the definitions below. */
#pragma GCC system_header

#include <glib.h>
#include <sluice/acquire.h>
#include <sluice/descriptor.h>
#include <sluice/export.h>

G_BEGIN_DECLS

/* ---- the two forms ------------------------------------------------------------
 *
 * 1. Guard: the first statement of a function; `fallback` is a statement that
 *    runs instead of the rest of the function when the limit says no.
 *
 *        int export_report(struct request *req)
 *        {
 *            RATE_LIMITED("report.export", return export_busy(req));
 *            ...
 *        }
 *        RATE_LIMITED_KEY("login", req->user, return too_many(req));
 *
 *    The key (a NUL-terminated UTF-8 string) must stay valid until the function
 *    returns. A guard's descriptor is registered before main, as the definition
 *    form's is (on ELF), or at its first call.
 *
 * 2. Definition: the macro writes the function and ends with the prototype of
 *    its body, which follows in braces.
 *
 *        static int export_busy(struct request *req, int flags);
 *        RATE_LIMITED_FUNCTION(int, export_report, (struct request *req, int flags),
 *                              (req, flags), "report.export", export_busy, NULL)
 *        {
 *            ... the body ...
 *        }
 *
 *    `params` is the parenthesised parameter list, `args` the same names as a
 *    call's argument list. A function with no parameters: params (void), args ().
 *    A function returning void: RATE_LIMITED_VOID_FUNCTION(fn, params, args, name,
 *    degrade, error). `ret` is a plain type: to make the function static, declare it
 *    static (`static int f(int);`) before the macro. The descriptor is linked into the registry by
 * a constructor before main, without allocating. SLUICE_BODY(fn) names the undecorated body.
 *
 *    `degrade` has the function's own signature and answers when the limit says no.
 *    `error` is NULL (written literally): when the limiter itself fails, the
 *    keyfile's on_error decides between the body and `degrade`. Otherwise it is a
 *    function called instead of both when the limiter fails, of the signature
 *
 *        ret error(const GError *error, const sluice_decision *verdict, params...)
 *
 *    where `error` says what failed (domain SLUICE_ERROR) and
 *    verdict->allowed is the on_error policy's verdict; it may call
 *    SLUICE_BODY(fn)(args) to run the body anyway (declare the callback before
 *    the macro and define it after, where the body's name is known).
 *
 * Concurrency permits taken by either form are given back when the function
 * returns (GCC/Clang cleanup attribute). Under an adaptive limit (algorithm =
 * adaptive) the call ends there too, and the time from its admission to its
 * return is a latency sample of the limit; a call the limit refused is none, and
 * one an error callback answered counts as a dropped call. Errors of the body are
 * the body's own.
 *
 * `name` is best a string literal (or a macro that expands to one): `sluice lint
 * --program` reads it from the built file and checks it has a rule. Any other
 * constant (a char array) works alike but cannot be checked there. The macros
 * need GCC or Clang, C99 or later or C++ (docs/compilers.md).
 */

#define RATE_LIMITED(name, fallback) SLUICE__GUARD(name, NULL, fallback, __LINE__)
/** RATE_LIMITED for a caller's key: the limit applies to each key separately. */
#define RATE_LIMITED_KEY(name, key, fallback) SLUICE__GUARD(name, key, fallback, __LINE__)

/** Defines fn, limited by the rule of name (the definition form, see above). */
#define RATE_LIMITED_FUNCTION(ret, fn, params, args, name, degrade, error)                         \
    SLUICE__DEFINE_HEAD(ret, fn, params, name)                                                     \
    ret fn params                                                                                  \
    {                                                                                              \
        SLUICE__LEASE(sluice__lease);                                                              \
        SLUICE__CAT(SLUICE__DISPATCH_, SLUICE__IS_NULL(SLUICE__IS_NULL_##error))                   \
        (return, fn, args, degrade, error)                                                         \
    }                                                                                              \
    static ret SLUICE_BODY(fn) params

/** RATE_LIMITED_FUNCTION for a function that returns nothing. */
#define RATE_LIMITED_VOID_FUNCTION(fn, params, args, name, degrade, error)                         \
    SLUICE__DEFINE_HEAD(void, fn, params, name)                                                    \
    void fn params                                                                                 \
    {                                                                                              \
        SLUICE__LEASE(sluice__lease);                                                              \
        SLUICE__CAT(SLUICE__DISPATCH_, SLUICE__IS_NULL(SLUICE__IS_NULL_##error))                   \
        (SLUICE__VOID_RETURN, fn, args, degrade, error)                                            \
    }                                                                                              \
    static void SLUICE_BODY(fn) params

/** The undecorated body of a RATE_LIMITED_FUNCTION (static, same translation unit). */
#define SLUICE_BODY(fn) fn##__sluice_body

/* ---- what the macros call: not for direct use ---------------------------------- */

/** What a decorated call holds until it returns: concurrency permits (priv_permits
 * > 0) or calls of an adaptive limit (< 0). */
typedef struct {
    gpointer priv_limiter;
    const char *priv_key;
    gint64 priv_permits;
} sluice_lease;

enum { SLUICE__DEGRADE = 0, SLUICE__RUN = 1, SLUICE__FAILED = -1 };

/** Decides one call of a decorated function. With error NULL the on_error policy
 * turns a failure into RUN or DEGRADE; otherwise FAILED sets *error and *verdict. */
SLUICE_API int sluice__enter(sluice_descriptor *descriptor, const char *key, sluice_lease *lease,
                             sluice_decision *verdict, GError **error);
/** Gives back what the lease holds (concurrency permits, adaptive calls). */
SLUICE_API void sluice__leave(sluice_lease *lease);
/** The cleanup of SLUICE__LEASE: sluice__leave when the lease holds permits (a
 * concurrency limit), so that other calls make no call on their way out. */
static inline void sluice__leave_held(sluice_lease *lease)
{
    if (G_UNLIKELY(lease->priv_permits != 0))
        sluice__leave(lease);
}
/** Links a descriptor into the registry (a constructor, before main; no allocation). */
SLUICE_API void sluice__register(sluice_descriptor *descriptor);

#define SLUICE__DESCRIPTOR(name, function)                                                         \
    {                                                                                              \
        SLUICE_DESCRIPTOR_VERSION, __LINE__, (name), __FILE__, (function), NULL, NULL, 0           \
    }
#define SLUICE__LEASE(var)                                                                         \
    __attribute__((cleanup(sluice__leave_held))) sluice_lease var = {NULL, NULL, 0}
#define SLUICE__CAT(a, b)           SLUICE__CAT_I(a, b)
#define SLUICE__CAT_I(a, b)         a##b
#define SLUICE__STRIP(...)          __VA_ARGS__
#define SLUICE__SECOND(...)         SLUICE__SECOND_I(__VA_ARGS__, ~)
#define SLUICE__SECOND_I(a, b, ...) b
/** 1 when the (pasted) error argument was the literal NULL, else 0. */
#define SLUICE__IS_NULL_NULL    ~, 1
#define SLUICE__IS_NULL(pasted) SLUICE__SECOND(pasted, 0)
#define SLUICE__VOID_RETURN(expr)                                                                  \
    do {                                                                                           \
        expr;                                                                                      \
        return;                                                                                    \
    } while (0)

/** The site record `sluice lint --program` reads from the built file, without
 * relocations: "sluice-site/1", the name as written (#name: a literal keeps its
 * quotes), __FILE__, the line and the function (definition form; "" in a guard),
 * each NUL-terminated, in the ELF section sluice_sites. None on other formats. */
#ifdef __ELF__
#define SLUICE__SITE(var, name, function, line)                                                    \
    static const char var[] SLUICE__SITE_ATTRIBUTES =                                              \
        "sluice-site/1\0" #name "\0" __FILE__ "\0" SLUICE__STR(line) "\0" function;
#else
#define SLUICE__SITE(var, name, function, line)
#endif
#define SLUICE__STR(x)   SLUICE__STR_I(x)
#define SLUICE__STR_I(x) #x
#if defined(__has_attribute)
#if __has_attribute(retain) /**< keeps the record through --gc-sections */
#define SLUICE__SITE_RETAIN , retain
#endif
#endif
#ifndef SLUICE__SITE_RETAIN
#define SLUICE__SITE_RETAIN
#endif
#define SLUICE__SITE_ATTRIBUTES                                                                    \
    __attribute__((section("sluice_sites"), used, aligned(1) SLUICE__SITE_RETAIN))

/* The guard form's descriptors: a pointer to each in the ELF section sluice_guards,
 * which a constructor of every file that includes this header registers before main,
 * so that sluice_init knows every guard's name. On other formats a guard registers
 * at its first call (sluice__enter), as it also does where the pointer is left out. */
#ifdef __ELF__
#define SLUICE__GUARD_ENTRY(var, descriptor)                                                       \
    static sluice_descriptor *const var                                                            \
        __attribute__((section("sluice_guards"), used SLUICE__SITE_RETAIN)) = (descriptor);
/* the section's bounds in the program or library this file is linked into (the linker
 * names them; NULL where no file of it has a guard) */
extern sluice_descriptor *const sluice__guards_start[] __asm__("__start_sluice_guards")
    __attribute__((weak, visibility("hidden")));
extern sluice_descriptor *const sluice__guards_stop[] __asm__("__stop_sluice_guards")
    __attribute__((weak, visibility("hidden")));
__attribute__((constructor, unused)) static void sluice__register_guards(void)
{
    for (sluice_descriptor *const *d = sluice__guards_start; d < sluice__guards_stop; d++)
        sluice__register(*d);
}
#else
#define SLUICE__GUARD_ENTRY(var, descriptor)
#endif

#define SLUICE__GUARD(name, key, fallback, line)                                                   \
    SLUICE__SITE(SLUICE__CAT(sluice__site_, line), name, , line)                                   \
    static sluice_descriptor SLUICE__CAT(sluice__descriptor_, line) =                              \
        SLUICE__DESCRIPTOR(name, __func__);                                                        \
    SLUICE__GUARD_ENTRY(SLUICE__CAT(sluice__guard_, line),                                         \
                        &SLUICE__CAT(sluice__descriptor_, line))                                   \
    SLUICE__LEASE(SLUICE__CAT(sluice__lease_, line));                                              \
    if (sluice__enter(&SLUICE__CAT(sluice__descriptor_, line), (key),                              \
                      &SLUICE__CAT(sluice__lease_, line), NULL, NULL) != SLUICE__RUN) {            \
        fallback;                                                                                  \
    } else                                                                                         \
        (void)0

#define SLUICE__DEFINE_HEAD(ret, fn, params, name)                                                 \
    SLUICE__SITE(fn##__sluice_site, name, #fn, __LINE__)                                           \
    ret fn params;                                                                                 \
    static ret SLUICE_BODY(fn) params;                                                             \
    static sluice_descriptor fn##__sluice_descriptor = SLUICE__DESCRIPTOR(name, #fn);              \
    __attribute__((constructor)) static void fn##__sluice_register(void)                           \
    {                                                                                              \
        sluice__register(&fn##__sluice_descriptor);                                                \
    }

/** error == NULL: the policy picks body or degrade. */
#define SLUICE__DISPATCH_1(RETURN, fn, args, degrade, error)                                       \
    if (sluice__enter(&fn##__sluice_descriptor, NULL, &sluice__lease, NULL, NULL) == SLUICE__RUN)  \
        RETURN(SLUICE_BODY(fn) args);                                                              \
    RETURN(degrade args);

/** an error callback: it answers whenever the limiter fails. */
#define SLUICE__DISPATCH_0(RETURN, fn, args, degrade, error)                                       \
    g_autoptr(GError) sluice__error = NULL;                                                        \
    sluice_decision sluice__verdict;                                                               \
    switch (sluice__enter(&fn##__sluice_descriptor, NULL, &sluice__lease, &sluice__verdict,        \
                          &sluice__error)) {                                                       \
    case SLUICE__RUN:                                                                              \
        RETURN(SLUICE_BODY(fn) args);                                                              \
    case SLUICE__DEGRADE:                                                                          \
        RETURN(degrade args);                                                                      \
    default:                                                                                       \
        RETURN(SLUICE__CALL_ERROR(error, SLUICE__STRIP args));                                     \
    }

#define SLUICE__CALL_ERROR(error, ...)                                                             \
    error(sluice__error, &sluice__verdict __VA_OPT__(, ) __VA_ARGS__)

G_END_DECLS

#endif
