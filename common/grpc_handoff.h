// What gRPC's callback API promises, told to ThreadSanitizer: everything a
// thread did before it started an operation on a reactor (StartRead,
// StartWrite, Finish, or returning the reactor from a method handler)
// happens before that operation's completion (OnReadDone, OnWriteDone,
// OnCancel, OnDone), which gRPC runs on another of its threads. gRPC keeps
// that promise through its completion queue, inside Debian's libgrpc, which
// is not instrumented: without these edges TSan reports every reactor's
// fields (constructed on one thread, used in a completion on another) as
// a race. With them, our handlers stay checked against every other
// thread (the ticker, the agent's threads, a concurrent completion).
//
// The edges are per reactor (its address) and cost nothing in a build
// without TSan.
#ifndef TRL_COMMON_GRPC_HANDOFF_H_
#define TRL_COMMON_GRPC_HANDOFF_H_

#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TRL_THREAD_SANITIZER 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define TRL_THREAD_SANITIZER 1
#endif

#ifdef TRL_THREAD_SANITIZER
extern "C" void __tsan_acquire(void* addr);
extern "C" void __tsan_release(void* addr);
#endif

namespace trl {

// Before handing `reactor` to gRPC (starting an operation on it, or
// returning it from a handler), and at the end of each of its completions.
inline void HandToGrpc(const void* reactor) {
#ifdef TRL_THREAD_SANITIZER
  __tsan_release(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

// At the start of each completion of `reactor` that gRPC runs.
inline void TakeFromGrpc(const void* reactor) {
#ifdef TRL_THREAD_SANITIZER
  __tsan_acquire(const_cast<void*>(reactor));
#else
  (void)reactor;
#endif
}

}  // namespace trl

#endif  // TRL_COMMON_GRPC_HANDOFF_H_
