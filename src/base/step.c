/*
 * step.c - step_exit_code() (see step.h).
 */
#include "step.h"

#include "exitcode.h"

int step_exit_code(enum step s)
{
    switch (s) {
    case STEP_FATAL: return EXIT_FATAL;
    case STEP_USAGE: return EXIT_USAGE;
    default: return EXIT_OK;
    }
}
