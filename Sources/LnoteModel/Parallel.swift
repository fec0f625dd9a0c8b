import Dispatch
import Foundation

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
