/* SPDX-License-Identifier: MIT */
/* Processes forked at once and waited for together (children.h). */
#include "children.h"

#include <errno.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

void children_fork(guint n, guint alarm_s, children_body body, gpointer data, pid_t *pids)
{
    for (guint i = 0; i < n; i++) {
        pids[i] = fork();
        if (pids[i] < 0)
            g_error("fork: %s", strerror(errno));
        if (pids[i] == 0) {
            alarm(alarm_s);
            _exit(body(i, data));
        }
    }
}

guint children_wait(guint n, const pid_t *pids)
{
    guint ok = 0;
    for (guint i = 0; i < n; i++) {
        int status = 0;
        pid_t got;
        while ((got = waitpid(pids[i], &status, 0)) < 0 && errno == EINTR)
            ;
        ok += got == pids[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
    }
    return ok;
}
