/*
 * rl_testhook.c — the tests' hooks (rl_testhook.h): zero in use.
 */
#include "rl_testhook.h"

_Atomic unsigned rl__faults;
_Atomic bool rl__counting;
