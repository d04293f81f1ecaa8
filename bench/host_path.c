/* lossjit's host path per call, on a CPU: the C API's calls as torch's ops make them (lent scratch, a
 * stream, the same views each call) against a CUDA driver that does nothing (tests/capi/fake_driver.c,
 * through LOSSJIT_LIBCUDA), so that what is timed or counted is lossjit's own work and not the
 * driver's. Under valgrind's callgrind the instructions per call are exact and the same from run to
 * run (bench/host_path.sh); the times printed here are only a rough guide. Only against that driver:
 * its "device memory" is host memory and its stream a token, which a real driver would refuse.
 *
 *   bench/host_path.sh [BUILD]
 *   LOSSJIT_LIBCUDA=BUILD/tests/liblossjit_fake_driver.so BUILD/bench/lossjit_host_path [CALLS [PROGRAM]] */
#include <lossjit/lossjit.h>

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static void check(lossjit_status status, const char* what) {
    if (status == LOSSJIT_OK) return;
    fprintf(stderr, "%s: %s\n", what, lossjit_last_error());
    exit(1);
}

/* The programs timed: MSE over 4096 elements, cross-entropy over 64 rows of 64 classes. */
static const char* const kPrograms[] = {"mean((p - t)^2)", "mean(logsumexp(x, -1) - x[y])"};
enum { kProgramCount = 2 };

int main(int argc, char** argv) {
    const long calls = argc > 1 ? atol(argv[1]) : 100000;
    const int only = argc > 2 ? atoi(argv[2]) : -1;  /* one program's index, or all */
    static float data[2][4096], grad[4096], value, scratch[1 << 18];
    static long long labels[64];
    lossjit_options options;
    lossjit_options_init(&options);
    for (int c = 0; c < kProgramCount; ++c) {
        if (only >= 0 && c != only) continue;
        lossjit_loss* loss = NULL;
        check(lossjit_compile(kPrograms[c], &options, &loss), "compile");
        int64_t flat[] = {4096}, rows[] = {64, 64}, per_row[] = {64};
        lossjit_view in[2] = {{data[0], LOSSJIT_FLOAT32, 1, flat, NULL}, {data[1], LOSSJIT_FLOAT32, 1, flat, NULL}};
        if (c == 1) {
            in[0] = (lossjit_view){data[0], LOSSJIT_FLOAT32, 2, rows, NULL};
            in[1] = (lossjit_view){labels, LOSSJIT_INT64, 1, per_row, NULL};
        }
        const char* wrt[] = {c == 0 ? "p" : "x"};
        lossjit_view g = {grad, LOSSJIT_FLOAT32, in[0].ndim, in[0].shape, NULL};
        lossjit_view v = {&value, LOSSJIT_FLOAT32, 0, NULL, NULL};
        int stream_token = 0;
        lossjit_exec exec = {&stream_token, 0, scratch, sizeof scratch};
        /* The first calls plan, compile and load; what follows repeats them. */
        check(lossjit_value_and_grad(loss, in, 2, wrt, 1, &g, &v, 1.0f, NULL, &exec), "value_and_grad");
        check(lossjit_evaluate(loss, in, 2, &v, &exec), "evaluate");
        double start = now_us();
        for (long i = 0; i < calls; ++i)
            check(lossjit_value_and_grad(loss, in, 2, wrt, 1, &g, &v, 1.0f, NULL, &exec), "value_and_grad");
        const double grad_us = (now_us() - start) / calls;
        start = now_us();
        for (long i = 0; i < calls; ++i) check(lossjit_evaluate(loss, in, 2, &v, &exec), "evaluate");
        const double value_us = (now_us() - start) / calls;
        printf("%-30s lossjit_value_and_grad %6.3f us, lossjit_evaluate %6.3f us a call (%ld calls)\n", kPrograms[c],
               grad_us, value_us, calls);
        lossjit_free(loss);
    }
    return 0;
}
