#ifndef C_PROMISES_SUPPORT_H
#define C_PROMISES_SUPPORT_H

// The calling thread's drain (Promises' `Drain.current`) as a thread-local word: one load from
// the thread pointer, where `pthread_getspecific` is a call and a key check. Swift has no
// thread-local variables of its own and does not import a C `__thread` variable, only
// functions that read and write it. The default TLS model: linked into an executable, as
// SwiftPM links a package, the linker turns the access into one load at a fixed offset from the
// thread pointer; in a shared library, even one opened with dlopen, it stays a call to
// `__tls_get_addr`, still cheaper than `pthread_getspecific`.
extern __thread void *promises_current_drain;

/// Returns the calling thread's drain, or NULL before its first use.
static inline void *promises_get_current_drain(void) { return promises_current_drain; }

/// Sets the calling thread's drain (NULL as the thread exits).
static inline void promises_set_current_drain(void *drain) { promises_current_drain = drain; }

#endif
