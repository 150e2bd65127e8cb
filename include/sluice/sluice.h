/* SPDX-License-Identifier: MIT */
/** @file
 * sluice: rate-limit C functions in-process or across a cluster that shares Redis.
 * The one header applications include. */
#ifndef SLUICE_SLUICE_H
#define SLUICE_SLUICE_H

#include <sluice/export.h>
#include <sluice/version.h>
#include <sluice/error.h>
#include <sluice/lifecycle.h>
#include <sluice/acquire.h>
#include <sluice/async.h>
#include <sluice/descriptor.h>
#include <sluice/macros.h>
#include <sluice/stats.h>
#include <sluice/admin.h>
#include <sluice/policy.h>
#include <sluice/clock.h>
#include <sluice/headers.h>

#endif
