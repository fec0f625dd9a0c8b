import CLnoteCurl
import Dispatch
import Foundation
import LnoteModel
import LnoteStore
import Synchronization

/// Dedicated threads that run blocking curl transfers, each with its own easy handle.
///
/// Threads start on demand up to `maxThreads` and live until `close()`; jobs wait in a FIFO
/// queue. A counting semaphore wakes one worker per queued job (and one per worker on close).
final class TransferThreadPool: Sendable {
    private struct State {
        var queue: [Transfer] = []
        var head = 0
        var threads = 0
        var idle = 0
        var closed = false
        var nextThreadNumber = 0
    }

    private let state = Mutex(State())
    private let wakeups = DispatchSemaphore(value: 0)
    let maxThreads: Int

    init(maxThreads: Int) { self.maxThreads = maxThreads }

    var isClosed: Bool { state.withLock { $0.closed } }

    /// Queues `transfer`; false when the pool is closed.
    func submit(_ transfer: Transfer) -> Bool {
        let spawn: Int? = state.withLock { s in
            guard !s.closed else { return nil }
            s.queue.append(transfer)
            let waiting = s.queue.count - s.head
            if waiting > s.idle && s.threads < maxThreads {
                s.threads += 1
                s.nextThreadNumber += 1
                return s.nextThreadNumber
            }
            return 0
        }
        guard let spawn else { return false }
        if spawn > 0 {
            let thread = Thread { [self] in
                ThreadName.setCurrent("lnote.curl-\(spawn)")
                self.workerLoop()
            }
            thread.start()
        }
        wakeups.signal()
        return true
    }

    /// Stops accepting jobs; workers drain the queue, then exit.
    func close() {
        let threads: Int = state.withLock { s in
            guard !s.closed else { return 0 }
            s.closed = true
            return s.threads
        }
        for _ in 0..<threads { wakeups.signal() }
    }

    private func nextJob() -> Transfer? {
        state.withLock { s in s.idle += 1 }
        wakeups.wait()
        return state.withLock { s -> Transfer? in
            s.idle -= 1
            if s.head < s.queue.count {
                let job = s.queue[s.head]
                s.head += 1
                if s.head > 64 && s.head * 2 > s.queue.count {
                    s.queue.removeFirst(s.head)
                    s.head = 0
                }
                return job
            }
            // No job for this wakeup: only close() signals without queueing.
            if s.closed { s.threads -= 1 }
            return nil
        }
    }

    private func workerLoop() {
        let worker = CurlWorker()
        defer { worker.release() }
        while true {
            guard let job = nextJob() else {
                if isClosed { return }
                continue
            }
            job.run(on: worker)
        }
    }
}

/// One easy handle and its error buffer, owned by one worker thread.
final class CurlWorker {
    let handle: UnsafeMutableRawPointer?
    let errorBuffer: UnsafeMutablePointer<CChar>

    init() {
        handle = curl_easy_init()
        errorBuffer = .allocate(capacity: clnote_curl_error_size())
        errorBuffer.initialize(repeating: 0, count: clnote_curl_error_size())
    }

    func release() {
        if let handle { curl_easy_cleanup(handle) }
        errorBuffer.deallocate()
    }
}

/// One request in flight: its inputs, the response being assembled by curl's callbacks,
/// and the continuation that `run` resumes exactly once.
///
/// `@unchecked Sendable`: the mutable response state is touched only by the worker thread
/// running the transfer (curl calls the callbacks on that thread); `cancelled` is atomic;
/// `continuation` is guarded by a mutex.
final class Transfer: @unchecked Sendable {
    let request: HTTPRequest
    let configuration: HTTPClient.Configuration
    let progress: (@Sendable (HTTPProgress) -> Void)?
    let cancelled = Atomic<Bool>(false)
    private let continuation = Mutex<CheckedContinuation<HTTPResponse, any Error>?>(nil)

    // Written by curl callbacks on the worker thread.
    var status = 0
    var headers = HTTPHeaders()
    var body: [UInt8] = []
    var headerBytes = 0
    var exceededCap = false
    var lastProgress = HTTPProgress()

    init(request: HTTPRequest, configuration: HTTPClient.Configuration,
         progress: (@Sendable (HTTPProgress) -> Void)?) {
        self.request = request
        self.configuration = configuration
        self.progress = progress
    }

    /// Stores the continuation and queues the transfer (the one async bridge).
    func start(_ c: CheckedContinuation<HTTPResponse, any Error>, on pool: TransferThreadPool) {
        continuation.withLock { $0 = c }
        if !pool.submit(self) {
            finish(.failure(LnoteError(.invalidState, "HTTP client is closed", path: request.url)))
        }
    }

    func cancel() { cancelled.store(true, ordering: .relaxed) }

    /// Resumes the continuation; later calls do nothing.
    func finish(_ result: Result<HTTPResponse, any Error>) {
        let c = continuation.withLock { c -> CheckedContinuation<HTTPResponse, any Error>? in
            defer { c = nil }
            return c
        }
        c?.resume(with: result)
    }

    /// Runs on a worker thread.
    func run(on worker: CurlWorker) {
        if cancelled.load(ordering: .relaxed) {
            finish(.failure(CancellationError()))
            return
        }
        guard let handle = worker.handle else {
            finish(.failure(LnoteError(.network, "curl_easy_init failed", path: request.url)))
            return
        }
        finish(Result { try perform(handle, errorBuffer: worker.errorBuffer) })
    }
}
