/* SPDX-License-Identifier: MIT */
/* The shm backend: every limit in one named shared-memory zone, shared by every
 * process on the host that names it (docs/shm.md). */
#ifndef SLUICE_SHM_H
#define SLUICE_SHM_H

#include <sluice/admin.h>

#include "backend.h"
#include "config.h"

/* A backend on the zone config names ([sluice] shm, shm_size, shm_mode), made
 * when there is none yet; NULL and *error when it cannot be attached (another
 * user's zone, another layout, a truncated file: SLUICE_ERROR_BACKEND). Its rules
 * are put in the zone by the backend's configure. */
sluice__backend *sluice__backend_shm_new(const sluice__config *config, GError **error);

/* What config says of the zone, as text: a backend made for one text serves
 * every config with the same (g_free it). */
char *sluice__shm_settings(const sluice__config *config);

#endif
