/* SPDX-License-Identifier: MIT */
/* prefork_server: a master that forks workers which accept on one socket and all
 * decide on one shared-memory zone (backend = shm in prefork_server.ini), so a
 * limit holds across workers as it would in one process. The protocol is one
 * line each way: the client sends "USER JOB_MS\n", the worker answers
 *   ok worker=PID remaining=R
 *   busy worker=PID retry_after_ms=X          (the user's rate: api)
 *   full worker=PID                           (the jobs in flight: jobs)
 * The master forks a new worker for each that dies, whatever it died of: the
 * zone is never wedged by a death (docs/shm.md). */
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sluice/sluice.h>

#define MAX_WORKERS 64

/* The signals the master waits for (sigwaitinfo), blocked in it; the mask its
 * workers get back. */
static sigset_t watched, unwatched;

/* ---- a worker ------------------------------------------------------------------- */

/* "jobs": calls in flight, across every worker; the permit goes back when the
 * body returns. */
static const char *job_full(int fd, int ms)
{
    (void)fd;
    (void)ms;
    return "full";
}

RATE_LIMITED_FUNCTION(const char *, run_job, (int fd, int ms), (fd, ms), "jobs", job_full, NULL)
{
    (void)fd;
    g_usleep((gulong)ms * 1000);
    return "ok";
}

/* Answers one connection: the user's rate first, then a job slot. */
static void serve(int fd)
{
    char line[256];
    ssize_t n = read(fd, line, sizeof line - 1);
    if (n <= 0)
        return;
    line[n] = '\0';
    char user[128] = "";
    int ms = 0;
    if (sscanf(line, "%127s %d", user, &ms) < 1)
        return;
    ms = CLAMP(ms, 0, 10000);
    sluice_decision d;
    char answer[256];
    if (sluice_acquire("api", user, 1, &d, NULL) != SLUICE_ALLOWED) {
        g_snprintf(answer, sizeof answer, "busy worker=%d retry_after_ms=%" G_GINT64_FORMAT "\n",
                   (int)getpid(), d.retry_after_ms);
    } else {
        const char *what = run_job(fd, ms);
        if (strcmp(what, "ok") == 0)
            g_snprintf(answer, sizeof answer, "ok worker=%d remaining=%" G_GINT64_FORMAT "\n",
                       (int)getpid(), d.remaining);
        else
            g_snprintf(answer, sizeof answer, "full worker=%d\n", (int)getpid());
    }
    (void)!write(fd, answer, strlen(answer));
}

/* A worker's life: accept and serve until told to stop. */
static void work(int listener)
{
    sigprocmask(SIG_SETMASK, &unwatched, NULL); /* SIGTERM ends it */
    for (;;) {
        int fd = accept(listener, NULL, NULL);
        if (fd < 0)
            continue;
        serve(fd);
        close(fd);
    }
}

static pid_t fork_worker(int listener)
{
    pid_t pid = fork();
    if (pid == 0) {
        work(listener);
        _exit(0);
    }
    return pid;
}

/* ---- the master ----------------------------------------------------------------- */

int main(int argc, char **argv)
{
    gint port = 8081, workers = 4;
    g_autofree char *config = NULL;
    const GOptionEntry entries[] = {
        {"port", 'p', 0, G_OPTION_ARG_INT, &port, "Port on 127.0.0.1 (0: any, printed)", "N"},
        {"workers", 'w', 0, G_OPTION_ARG_INT, &workers, "Worker processes (default 4)", "N"},
        {"config", 'c', 0, G_OPTION_ARG_FILENAME, &config,
         "The keyfile (default: examples/prefork_server.ini)", "FILE"},
        G_OPTION_ENTRY_NULL,
    };
    g_autoptr(GOptionContext) context = g_option_context_new("- workers that share one zone");
    g_option_context_add_main_entries(context, entries, NULL);
    g_autoptr(GError) error = NULL;
    if (!g_option_context_parse(context, &argc, &argv, &error) || workers < 1 ||
        workers > MAX_WORKERS) {
        fprintf(stderr, "prefork_server: %s\n", error ? error->message : "bad --workers");
        return 2;
    }
    /* attached once, before the workers are forked: they share the mapping */
    if (!sluice_init(config ? config : "examples/prefork_server.ini", &error)) {
        fprintf(stderr, "prefork_server: %s\n", error->message);
        return 1;
    }
    int listener = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {.sin_family = AF_INET,
                               .sin_port = htons((guint16)port),
                               .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof addr;
    if (bind(listener, (struct sockaddr *)&addr, sizeof addr) != 0 || listen(listener, 128) != 0 ||
        getsockname(listener, (struct sockaddr *)&addr, &len) != 0) {
        fprintf(stderr, "prefork_server: cannot listen on port %d: %s\n", port, g_strerror(errno));
        return 1;
    }
    sluice_zone_info zone;
    if (sluice_zone_get(&zone, NULL))
        printf("listening on 127.0.0.1:%d, %d workers, zone %s\n", ntohs(addr.sin_port), workers,
               zone.path);
    fflush(stdout);

    /* a worker's death and the master's stop are signals the master waits for,
     * blocked so that none comes between a look and the wait (a handler and
     * waitpid would wait for ever on a SIGTERM that came just before it) */
    sigemptyset(&watched);
    sigaddset(&watched, SIGCHLD);
    sigaddset(&watched, SIGTERM);
    sigaddset(&watched, SIGINT);
    sigprocmask(SIG_BLOCK, &watched, &unwatched);
    pid_t pids[MAX_WORKERS];
    for (int i = 0; i < workers; i++)
        pids[i] = fork_worker(listener);
    for (int sig = 0; sig != SIGTERM && sig != SIGINT;) {
        sig = sigwaitinfo(&watched, NULL);
        int status;
        pid_t dead;
        while (sig == SIGCHLD && (dead = waitpid(-1, &status, WNOHANG)) > 0) {
            for (int i = 0; i < workers; i++) {
                if (pids[i] != dead)
                    continue;
                fprintf(stderr, "prefork_server: worker %d died (%s %d); forking another\n",
                        (int)dead, WIFSIGNALED(status) ? "signal" : "exit",
                        WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
                pids[i] = fork_worker(listener);
            }
        }
    }
    for (int i = 0; i < workers; i++)
        kill(pids[i], SIGTERM);
    for (int i = 0; i < workers; i++)
        waitpid(pids[i], NULL, 0);
    sluice_shutdown();
    return 0;
}
