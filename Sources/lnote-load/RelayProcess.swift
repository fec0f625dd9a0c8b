#if canImport(Glibc)
import Glibc
#endif
import Foundation
import LnoteModel

/// The real `lnote relay` as a child process on 127.0.0.1: started on any free port the first
/// time, then restarted on the same database and the same port after each SIGKILL. Its
/// standard output and error go to files in the run's directory (`NAME.out.K` per start,
/// `NAME.err` appended across restarts; NAME is `relay`, or `relay-I` when there are
/// several), so a failure can show what the relay said.
final class RelayProcess: @unchecked Sendable {
    let lnote: String
    /// Where the relay keeps its data: `--db FILE` or `--postgres URL --pool-size N`.
    let store: [String]
    let dir: String
    let name: String
    private(set) var port: UInt16 = 0
    private(set) var baseURL = ""
    private var process: Process?
    private var starts = 0

    init(lnote: String, store: [String], dir: String, name: String = "relay") {
        self.lnote = lnote
        self.store = store
        self.dir = dir
        self.name = name
    }

    var pid: Int32? { process?.processIdentifier }
    var isRunning: Bool { process?.isRunning ?? false }

    /// How the last process ended: "exit N" or "signal N" (nil while it runs).
    var ending: String? {
        guard let p = process, !p.isRunning else { return nil }
        return p.terminationReason == .uncaughtSignal ? "signal \(p.terminationStatus)" : "exit \(p.terminationStatus)"
    }

    /// Starts the relay and waits for its `url:` line. A port just released by a killed relay
    /// can take a moment to be bindable again: start is retried for up to 10 s.
    func start() async throws {
        let deadline = ContinuousClock.now + .seconds(10)
        while true {
            do {
                try await startOnce()
                return
            } catch {
                if ContinuousClock.now > deadline { throw error }
                try await Task.sleep(for: .milliseconds(100))
            }
        }
    }

    private func startOnce() async throws {
        starts += 1
        let out = dir + "/\(name).out.\(starts)"
        _ = FileManager.default.createFile(atPath: out, contents: nil)
        let errPath = dir + "/\(name).err"
        if !FileManager.default.fileExists(atPath: errPath) { _ = FileManager.default.createFile(atPath: errPath, contents: nil) }
        let outHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: out))
        let errHandle = try FileHandle(forWritingTo: URL(fileURLWithPath: errPath))
        errHandle.seekToEndOfFile()
        defer {
            try? outHandle.close()
            try? errHandle.close()
        }
        let p = Process()
        p.executableURL = URL(fileURLWithPath: lnote)
        p.arguments = ["relay"] + store + ["--port", String(port), "--max-connections-per-ip", "0"]
        p.standardOutput = outHandle
        p.standardError = errHandle
        p.standardInput = FileHandle.nullDevice
        try p.run()
        process = p
        let deadline = ContinuousClock.now + .seconds(30)
        while ContinuousClock.now < deadline {
            let text = (try? String(contentsOfFile: out, encoding: .utf8)) ?? ""
            if let line = text.split(separator: "\n").first(where: { $0.hasPrefix("url: ") }), text.hasSuffix("\n") {
                let url = String(line.dropFirst(5))
                guard let colon = url.lastIndex(of: ":"), let p = UInt16(url[url.index(after: colon)...]) else {
                    throw LnoteError(.network, "lnote relay printed an unexpected url line: \(line)")
                }
                port = p
                baseURL = url
                return
            }
            if !p.isRunning {
                throw LnoteError(.network, "\(name) (lnote relay) ended (\(ending ?? "?")) before serving: \(tail(errPath))")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        kill(SIGKILL)
        _ = await waitForExit()
        throw LnoteError(.network, "\(name) (lnote relay) did not print its url within 30 s: \(tail(errPath))")
    }

    func kill(_ signal: Int32) {
        guard let p = process, p.isRunning else { return }
        _ = Glibc.kill(p.processIdentifier, signal)
    }

    /// Waits (polling, never blocking a thread) until the process has ended; false after 30 s.
    func waitForExit() async -> Bool {
        guard let p = process else { return true }
        for _ in 0..<3000 where p.isRunning { try? await Task.sleep(for: .milliseconds(10)) }
        return !p.isRunning
    }

    /// The last lines the relay wrote on standard error.
    func tail(_ path: String? = nil) -> String {
        let text = (try? String(contentsOfFile: path ?? dir + "/\(name).err", encoding: .utf8)) ?? ""
        return text.split(separator: "\n").suffix(5).joined(separator: " | ")
    }
}
