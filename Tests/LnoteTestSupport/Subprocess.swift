import Foundation
import Synchronization

/// Runs child processes from async tests without ever blocking one of Swift's cooperative
/// threads (there are as many as cores: two here). Blocking there — `waitUntilExit`,
/// `readDataToEndOfFile`, `usleep` — starves every other test running in parallel, which is
/// how unrelated HTTP tests time out. Reads happen on dedicated threads; exits are polled
/// with `waitpid(WNOHANG)` between `Task.sleep`s.
public enum Subprocess {
    public struct Result: Sendable {
        /// Exit status when the child exited normally.
        public var status: Int32?
        /// The signal that ended the child, if one did.
        public var signal: Int32?
        public var out: [UInt8]
        public var err: [UInt8]
        public var outText: String { String(decoding: out, as: UTF8.self) }
        public var errText: String { String(decoding: err, as: UTF8.self) }
        /// Exit status, or 128 + signal, as a shell reports it.
        public var code: Int32 { status ?? (128 + (signal ?? 0)) }
    }

    /// A started child with its output being collected on background threads.
    public final class Child: Sendable {
        public let process: Process
        public var pid: Int32 { process.processIdentifier }
        private let out: Collector
        private let err: Collector

        init(process: Process, out: Collector, err: Collector) {
            self.process = process
            self.out = out
            self.err = err
        }

        /// Set once `wait` has reaped the child: its pid may belong to another process then.
        private let reaped = Atomic<Bool>(false)

        /// Sends `sig` to the child, unless it was already reaped (its pid may have been reused).
        public func kill(_ sig: Int32 = SIGKILL) {
            guard !reaped.load(ordering: .acquiring) else { return }
            _ = Glibc.kill(pid, sig)
        }

        /// What the child has written to standard output so far.
        public var outputSoFar: String { String(decoding: out.soFar, as: UTF8.self) }

        /// Waits until the child's standard output holds `text` (true), or it ends or
        /// `seconds` pass without it (false).
        public func waitForOutput(_ text: String, seconds: Double = 30) async -> Bool {
            let needle = Array(text.utf8)
            let deadline = ContinuousClock.now + .milliseconds(Int64(seconds * 1000))
            while ContinuousClock.now < deadline {
                let got = out.soFar
                if got.count >= needle.count, (0...(got.count - needle.count)).contains(where: { i in
                    got[i..<(i + needle.count)].elementsEqual(needle)
                }) { return true }
                if out.isFinished { return false }
                try? await Task.sleep(for: .milliseconds(5))
            }
            return false
        }

        /// Waits for the child to end (polling), then for its output to be read to the end.
        ///
        /// Foundation reaps children itself; whichever side reaps first has the status. We
        /// poll `waitpid(WNOHANG)`: when it returns the child, its status is ours; when it
        /// says ECHILD, Foundation took it, and its `terminationStatus` is read once
        /// `isRunning` turns false.
        public func wait() async -> Result {
            var raw: Int32 = 0
            var ours = false
            while true {
                let r = waitpid(pid, &raw, WNOHANG)
                if r == pid { ours = true; reaped.store(true, ordering: .releasing); break }
                if r == -1 && errno == ECHILD { reaped.store(true, ordering: .releasing); break }
                try? await Task.sleep(for: .milliseconds(2))
            }
            let o = await out.value(), e = await err.value()
            if ours {
                let exited = (raw & 0x7f) == 0
                return Result(status: exited ? (raw >> 8) & 0xff : nil, signal: exited ? nil : raw & 0x7f, out: o, err: e)
            }
            for _ in 0..<5_000 where process.isRunning { try? await Task.sleep(for: .milliseconds(2)) }
            let bySignal = process.terminationReason == .uncaughtSignal
            return Result(status: bySignal ? nil : process.terminationStatus,
                          signal: bySignal ? process.terminationStatus : nil, out: o, err: e)
        }
    }

    /// Collects everything a pipe delivers, on its own thread; what has arrived so far can
    /// be looked at before the end.
    final class Collector: Sendable {
        private let state = Mutex<(partial: [UInt8], data: [UInt8]?, waiters: [CheckedContinuation<[UInt8], Never>])>(([], nil, []))

        init(_ handle: FileHandle) {
            let t = Thread { [self] in
                while true {
                    let chunk = handle.availableData
                    if chunk.isEmpty { break }
                    state.withLock { $0.partial += chunk }
                }
                // Closed here, at the end of its data: nothing released these read ends, and a
                // test process that had run ~1,000 children held as many pipes, past the 1,024
                // descriptors that Foundation's `Process.run()` handles (it crashed there with
                // signal 11, twice in CI).
                try? handle.close()
                let waiters = state.withLock { s -> [CheckedContinuation<[UInt8], Never>] in
                    s.data = s.partial
                    defer { s.waiters = [] }
                    return s.waiters
                }
                let d = state.withLock { $0.data! }
                for w in waiters { w.resume(returning: d) }
            }
            t.start()
        }

        var soFar: [UInt8] { state.withLock { $0.partial } }
        var isFinished: Bool { state.withLock { $0.data != nil } }

        func value() async -> [UInt8] {
            await withCheckedContinuation { c in
                let ready = state.withLock { s -> [UInt8]? in
                    if let d = s.data { return d }
                    s.waiters.append(c)
                    return nil
                }
                if let ready { c.resume(returning: ready) }
            }
        }
    }

    /// Starts `executable` with `arguments`; stdin is /dev/null.
    public static func start(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                             directory: String? = nil) throws -> Child {
        let p = Process()
        p.executableURL = URL(fileURLWithPath: executable)
        p.arguments = arguments
        if !environment.isEmpty {
            var env = ProcessInfo.processInfo.environment
            for (k, v) in environment { env[k] = v }
            p.environment = env
        }
        if let directory { p.currentDirectoryURL = URL(fileURLWithPath: directory) }
        let out = Pipe(), err = Pipe()
        p.standardOutput = out
        p.standardError = err
        p.standardInput = FileHandle.nullDevice
        try p.run()
        return Child(process: p, out: Collector(out.fileHandleForReading), err: Collector(err.fileHandleForReading))
    }

    /// Runs to completion.
    public static func run(_ executable: String, _ arguments: [String], environment: [String: String] = [:],
                           directory: String? = nil) async throws -> Result {
        await (try start(executable, arguments, environment: environment, directory: directory)).wait()
    }

    /// The built product `name` next to the running test bundle (SwiftPM's build folder),
    /// or under `.build/debug` of the package that holds `file`.
    public static func product(_ name: String, file: String = #filePath) -> String {
        var dir = Bundle.main.bundleURL
        for _ in 0..<4 {
            let c = dir.appendingPathComponent(name)
            if FileManager.default.isExecutableFile(atPath: c.path) { return c.path }
            dir = dir.deletingLastPathComponent()
        }
        var root = URL(fileURLWithPath: file)
        while root.path != "/" {
            root = root.deletingLastPathComponent()
            let c = root.appendingPathComponent(".build/debug/\(name)")
            if FileManager.default.isExecutableFile(atPath: c.path) { return c.path }
        }
        return name
    }
}
