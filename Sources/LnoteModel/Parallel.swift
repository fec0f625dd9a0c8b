import Dispatch
import Foundation
import Synchronization

/// Runs independent pieces of CPU work on several cores: the decoders use it for big pages,
/// whose strokes decode independently of one another.
///
/// The work is split into contiguous chunks, one per iteration of
/// `DispatchQueue.concurrentPerform`, which also runs iterations on the calling thread, so
/// the call returns when all are done and never waits for a thread that is not working.
/// Results come back in index order, so a parallel computation gives exactly what the
/// serial one gives.
///
/// `package` access: the modules of lnote share it; it is no part of the library's API.
package enum Parallel {
    /// Processors available to this process (at least 1).
    package static let processors = max(1, ProcessInfo.processInfo.activeProcessorCount)

    /// `body(i)` for every `i` in `0..<count`, in order. With `parallel` false, or one
    /// processor, or fewer than two items, it is a plain serial map.
    ///
    /// `body` is called concurrently from several threads, hence `@Sendable`: the compiler
    /// checks that it only shares what may be shared.
    package static func map<T>(_ count: Int, parallel: Bool = true, _ body: @Sendable (Int) -> T) -> [T] {
        guard parallel, processors > 1, count > 1 else { return (0..<count).map(body) }
        // A few chunks per processor balances uneven items without much overhead.
        let chunks = min(count, processors * 4)
        let out = UnsafeMutableBufferPointer<T>.allocate(capacity: count)
        defer { out.deallocate() }
        return withoutActuallyEscaping(body) { body in
            let shared = Shared(out: out, body: body)
            DispatchQueue.concurrentPerform(iterations: chunks) { c in
                let lower = count * c / chunks, upper = count * (c + 1) / chunks
                for i in lower..<upper { (shared.out.baseAddress! + i).initialize(to: shared.body(i)) }
            }
            // Every slot was initialized exactly once: move them out.
            return Array(UnsafeMutableBufferPointer(start: out.baseAddress!, count: count).moveElements())
        }
    }

    /// `main()` on this thread and `other()` beside it, on a thread of the global queue
    /// started at once; both results. When `main` is done first and no thread has started
    /// `other` yet, this thread runs it: the call never waits for work that has not begun, so
    /// a busy pool only costs the parallelism. With one processor, both run here in turn.
    ///
    /// For two halves of unequal length, the longer as `main`: a thread started by `async`
    /// is at work sooner than `concurrentPerform`'s second one (on a virtual machine a
    /// sleeping thread takes tens of microseconds to wake), and a `main` that finishes last
    /// finds `other`'s result waiting. And unlike two iterations of `concurrentPerform`,
    /// `main` is not nested in one: a `map` inside it runs in parallel too.
    package static func beside<Main, Other: Sendable>(_ other: @escaping @Sendable () -> Other,
                                                      _ main: () throws -> Main) rethrows -> (Main, Other) {
        guard processors > 1 else { return (try main(), other()) }
        let side = Beside(other)
        DispatchQueue.global().async { side.runIfNotTaken() }
        let m = try main()
        return (m, side.result())
    }

    /// `beside`'s other half: run once, by whichever thread takes it first.
    private final class Beside<T: Sendable>: Sendable {
        private struct State: Sendable {
            var work: (@Sendable () -> T)?
            var result: T?
        }
        private let state: Mutex<State>
        private let finished = DispatchSemaphore(value: 0)

        init(_ work: @escaping @Sendable () -> T) { state = Mutex(State(work: work)) }

        func runIfNotTaken() {
            guard let work = state.withLock({ s in s.work.take() }) else { return }
            let r = work()
            state.withLock { $0.result = r }
            finished.signal()
        }

        /// The result: computed here if no thread has taken the work, else waited for.
        func result() -> T {
            runIfNotTaken()
            finished.wait()
            guard let r = state.withLock({ $0.result.take() }) else { preconditionFailure("beside: no result after the signal") }
            return r
        }
    }

    /// What the iterations share: each writes only its own slots.
    private struct Shared<T>: @unchecked Sendable {
        let out: UnsafeMutableBufferPointer<T>
        let body: @Sendable (Int) -> T
    }
}

private extension UnsafeMutableBufferPointer {
    /// The elements, moved out (the memory is left uninitialized).
    func moveElements() -> [Element] {
        [Element](unsafeUninitializedCapacity: count) { buffer, initialized in
            _ = buffer.moveInitialize(fromContentsOf: self)
            initialized = count
        }
    }
}
