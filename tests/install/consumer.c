/* A C program against the installed C ABI (tests/install/run.sh builds it through the CMake target
 * lossjit::lossjit_c and through pkg-config): compiles a program, reads its inputs, and reports a
 * mistake's column. Needs no GPU. */
#include <stdio.h>

#include "lossjit/lossjit.h"

int main(void) {
    lossjit_options options;
    lossjit_options_init(&options);
    lossjit_loss* loss = NULL;
    if (lossjit_compile("mean((p - t)^2)", &options, &loss) != LOSSJIT_OK) {
        fprintf(stderr, "%s\n", lossjit_last_error());
        return 1;
    }
    printf("lossjit %s, inputs %s %s\n", lossjit_version(), lossjit_input_name(loss, 0), lossjit_input_name(loss, 1));
    lossjit_free(loss);
    if (lossjit_compile("mean(p +)", &options, &loss) != LOSSJIT_ERROR_SOURCE) return 1;
    printf("a mistake at column %d\n", (int)lossjit_last_error_column());
    return 0;
}
