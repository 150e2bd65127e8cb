/* SPDX-License-Identifier: MIT */
/** @file
 * The export macro: only symbols marked SLUICE_API leave the shared library. */
#ifndef SLUICE_EXPORT_H
#define SLUICE_EXPORT_H

#if defined(__GNUC__) || defined(__clang__)
#define SLUICE_API __attribute__((visibility("default")))
#else
#define SLUICE_API
#endif

#endif
