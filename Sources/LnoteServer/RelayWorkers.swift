import Foundation
import LnoteStore

/// Threads of its own for a store's blocking calls, at most `limit` at once: as many calls
/// as the backend can run transactions at once (`RelayDatabase.maxConcurrentTransactions`).
///
/// A concurrent `DispatchQueue` was used before. Dispatch sizes its threads to the machine's
/// cores (about five on two cores), not to the database's connections, so with a pool of 16
/// most connections idled while requests waited for a thread; and those threads are shared
/// with the rest of the process. Here a call waits only for a free thread of this store.
///
/// Threads are started when work arrives and no thread is idle, and end after
/// `idleSeconds` without work, so an unused store holds none. Work runs in arrival order.
final class RelayWorkers: @unchecked Sendable {
    let limit: Int
    let name: String
    let idleSeconds: Double
    /// Guards `queue`, `head`, `threads`, `idle` and `wakeups`.
    private let condition = NSCondition()
    private var queue: [@Sendable () -> Void] = []
    private var head = 0
    private var threads = 0
    /// Idle threads not yet claimed by a `submit`.
    private var idle = 0
    /// Claims not yet taken up by a woken thread.
    private var wakeups = 0

    init(limit: Int, name: String, idleSeconds: Double = 10) {
        self.limit = max(1, limit)
        self.name = name
        self.idleSeconds = idleSeconds
    }

    /// Threads that exist now (running work or idle).
    var threadCount: Int {
        condition.lock(); defer { condition.unlock() }
        return threads
    }

    /// Runs `work` on one of the threads, as soon as one is free.
    func submit(_ work: @escaping @Sendable () -> Void) {
        condition.lock()
        queue.append(work)
        var start = false
        if idle > 0 {
            // Claimed here, so that the next call does not count on the same idle thread.
            idle -= 1
            wakeups += 1
            condition.signal()
        } else if threads < limit {
            threads += 1
            start = true
        }
        condition.unlock()
        if start {
            let thread = Thread { [self] in
                ThreadName.setCurrent(name)
                run()
            }
            thread.start()
        }
    }

    private func run() {
        condition.lock()
        while true {
            if head < queue.count {
                let work = queue[head]
                head += 1
                if head >= 64 && head * 2 >= queue.count {
                    queue.removeFirst(head)
                    head = 0
                }
                condition.unlock()
                work()
                condition.lock()
                continue
            }
            idle += 1
            let deadline = Date().addingTimeInterval(idleSeconds)
            var claimed = false
            while true {
                if wakeups > 0 { wakeups -= 1; claimed = true; break }
                if !condition.wait(until: deadline) {
                    if wakeups > 0 { wakeups -= 1; claimed = true }
                    break
                }
            }
            if !claimed {
                idle -= 1
                if head >= queue.count {
                    threads -= 1
                    condition.unlock()
                    return
                }
            }
        }
    }
}
