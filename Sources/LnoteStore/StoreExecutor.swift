import Foundation
import Synchronization

/// A serial executor with a thread of its own.
///
/// `Notebook` and every `Document` run on one each, so the blocking system calls the store
/// makes (`pread`, `pwrite`, `fdatasync`, `fsync`, a bounded `flock` wait) never occupy one
/// of Swift's cooperative threads, of which there are only as many as cores: a document
/// waiting for a disk or a lock held by another process does not starve unrelated tasks
/// (other documents, an HTTP server's handlers, tests running in parallel). Each actor
/// still runs one job at a time; two documents run in parallel on their own threads.
///
/// The thread ends once the executor is released (after its actor is gone) and the jobs
/// queued before that have run. `run(_:)` runs a plain closure on the thread, for the
/// work an actor does before it exists (opening a notebook folder).
final class StoreExecutor: SerialExecutor {
    private let queue: JobQueue

    /// - Parameter name: the thread's name (`lnote.document`), shown by debuggers and `top -H`;
    ///   at most 15 bytes (Linux refuses longer thread names).
    init(name: String) {
        let queue = JobQueue()
        self.queue = queue
        queue.setOwner(self)
        let unowned = UnownedSerialExecutor(ordinary: self)
        // The name is set by the thread itself, with `ThreadName` (see there why not
        // Foundation's `Thread.name`).
        let thread = Thread {
            ThreadName.setCurrent(name)
            queue.run(on: unowned)
        }
        thread.start()
    }

    deinit { queue.stop() }

    func enqueue(_ job: consuming ExecutorJob) {
        queue.push(.job(UnownedJob(job)))
    }

    func asUnownedSerialExecutor() -> UnownedSerialExecutor {
        UnownedSerialExecutor(ordinary: self)
    }

    /// Runs `body` on this executor's thread (after the jobs queued before it) and returns
    /// its result.
    func run<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<T, Error>) in
            queue.push(.closure {
                do { c.resume(returning: try body()) } catch { c.resume(throwing: error) }
            })
        }
    }
}

/// The jobs of one `StoreExecutor`, run in order by its thread.
private final class JobQueue: @unchecked Sendable {
    enum Item {
        case job(UnownedJob)
        case closure(@Sendable () -> Void)
    }

    // Guarded by `condition`.
    private let condition = NSCondition()
    private var items: [Item] = []
    private var stopped = false
    /// The executor, held strongly only while a batch of its jobs runs: an actor's isolated
    /// deinit runs on the actor's executor and releases it (a stored property) before the job
    /// ends, and the runtime still consults the current executor after that (releasing the
    /// documents a notebook held runs their deinits from here). Without this, the executor
    /// would be freed under its own running job.
    private weak var owner: StoreExecutor?

    func setOwner(_ executor: StoreExecutor) {
        condition.lock()
        owner = executor
        condition.unlock()
    }

    func push(_ item: Item) {
        condition.lock()
        items.append(item)
        condition.signal()
        condition.unlock()
    }

    func stop() {
        condition.lock()
        stopped = true
        condition.signal()
        condition.unlock()
    }

    /// The thread's loop: takes every queued item at once, runs them, and ends when stopped
    /// with nothing left.
    func run(on executor: UnownedSerialExecutor) {
        while true {
            condition.lock()
            while items.isEmpty && !stopped { condition.wait() }
            if items.isEmpty {
                condition.unlock()
                return
            }
            let batch = items
            items.removeAll(keepingCapacity: true)
            let keepAlive = owner
            condition.unlock()
            for item in batch {
                switch item {
                case .job(let job): job.runSynchronously(on: executor)
                case .closure(let body): body()
                }
            }
            withExtendedLifetime(keepAlive) {}
        }
    }
}
