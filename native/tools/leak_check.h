/* LeakSanitizer's check at a point the tool chooses (builds with -DRVK_SANITIZE=ON; a no-op otherwise).
 *
 * rvk-run and rvk-fuzz call rvk_leak_check() once every runtime object they made is destroyed,
 * while the drivers are still loaded. The check then runs there instead of at exit (a second check
 * does nothing): at exit, the static destructors of the drivers loaded after main began (pocl's
 * std::maps of raw PassManager/TargetMachine pointers, made on its first kernel compile) have run,
 * and what those maps held reads as a leak. Here it is still reachable, while anything the runtime
 * lost (a buffer it never released, even one the driver allocated) is not, and is reported.
 * ASAN_OPTIONS=detect_leaks=0 turns this check off too. */
#ifndef RVK_LEAK_CHECK_H
#define RVK_LEAK_CHECK_H

#ifdef RVK_SANITIZE
#include <sanitizer/lsan_interface.h>
static inline void rvk_leak_check(void) { __lsan_do_leak_check(); }
#else
static inline void rvk_leak_check(void) {}
#endif

#endif
