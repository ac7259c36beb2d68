/*
 * rl_probes.h — private: the loop's USDT probes (provider "crunloop"), for
 * perf, bpftrace and SystemTap (docs/runloop.md, "Loop health"). Each is a
 * nop in the code and a note in the library's ELF file until a tracer
 * attaches; the callout probes have semaphores, so the clock is read for
 * them only while one is attached. Without <sys/sdt.h> (Debian's
 * systemtap-sdt-dev) they compile to nothing.
 *
 *   pass_start(loop, mode)          pass_end(loop)
 *   sleep_start(loop)               sleep_end(loop)
 *   callout_start(loop, kind, fn)   callout_end(loop, kind, fn, ns)
 *   wakeup(loop, cause)             timer_fire(loop, timer, lateness_ns)
 *
 * kind is an RLCalloutKind, cause an RLWakeUpCause, fn the callout
 * function's address, mode the mode's name (a C string).
 */
#ifndef CRUNLOOP_RL_PROBES_H
#define CRUNLOOP_RL_PROBES_H

#if defined(__has_include)
#if __has_include(<sys/sdt.h>) && !defined(RL_NO_PROBES)
#define RL_HAVE_PROBES 1
#endif
#endif

#if RL_HAVE_PROBES
#define _SDT_HAS_SEMAPHORES 1
/* Probe arguments in registers (or constants): the default lets the
 * compiler keep them in stack slots, a store each even with no tracer. */
#define STAP_SDT_ARG_CONSTRAINT nr
#include <sys/sdt.h>

/* One semaphore per probe (sys/sdt.h names them provider_name_semaphore);
 * defined in rl_stats.c. A tracer attached to a probe counts in it. */
#define RL__PROBE_SEMAPHORE(name) extern volatile unsigned short crunloop_##name##_semaphore RL__HIDDEN
RL__PROBE_SEMAPHORE(pass_start);
RL__PROBE_SEMAPHORE(pass_end);
RL__PROBE_SEMAPHORE(sleep_start);
RL__PROBE_SEMAPHORE(sleep_end);
RL__PROBE_SEMAPHORE(callout_start);
RL__PROBE_SEMAPHORE(callout_end);
RL__PROBE_SEMAPHORE(wakeup);
RL__PROBE_SEMAPHORE(timer_fire);

#define RL__PROBE_ON(name) (crunloop_##name##_semaphore)
#define RL__PROBE1(name, a) STAP_PROBE1(crunloop, name, a)
#define RL__PROBE2(name, a, b) STAP_PROBE2(crunloop, name, a, b)
#define RL__PROBE3(name, a, b, c) STAP_PROBE3(crunloop, name, a, b, c)
#define RL__PROBE4(name, a, b, c, d) STAP_PROBE4(crunloop, name, a, b, c, d)
#else
#define RL__PROBE_ON(name) 0
#define RL__PROBE1(name, a) ((void)0)
#define RL__PROBE2(name, a, b) ((void)0)
#define RL__PROBE3(name, a, b, c) ((void)0)
#define RL__PROBE4(name, a, b, c, d) ((void)0)
#endif

#endif /* CRUNLOOP_RL_PROBES_H */
