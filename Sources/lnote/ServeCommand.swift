import Foundation
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer
import Synchronization

extension CommandTable {
    static let serverOptions: Set<String> = ["port", "bind", "tls-cert", "tls-key", "max-body-mb", "max-connections",
                                             "max-connections-per-ip"]

    /// The server's settings from the command line.
    /// - Parameters:
    ///   - connections: the default limit of connections at once, and of those from one address.
    static func serverConfiguration(_ args: Arguments, connections: (total: Int, perIP: Int) = (128, 32)) throws -> HTTPServer.Configuration {
        var c = HTTPServer.Configuration()
        let total = try args.int("max-connections") ?? connections.total
        let perIP = try args.int("max-connections-per-ip") ?? connections.perIP
        guard (1...1_000_000).contains(total), (0...1_000_000).contains(perIP) else {
            throw Arguments.UsageError(message: "--max-connections must be 1...1000000, --max-connections-per-ip 0...1000000 (0: no limit)")
        }
        c.connectionLimit = UInt32(total)
        c.perIPConnectionLimit = UInt32(perIP)
        raiseDescriptorLimit(to: total + 256)
        c.bindAddress = args.option("bind") ?? "127.0.0.1"
        if let p = try args.int("port") {
            guard (0...65535).contains(p) else { throw Arguments.UsageError(message: "--port must be 0...65535") }
            c.port = UInt16(p)
        }
        switch (args.option("tls-cert"), args.option("tls-key")) {
        case (let cert?, let key?): c.tls = .init(certificatePath: cert, keyPath: key)
        case (nil, nil): break
        default: throw Arguments.UsageError(message: "--tls-cert and --tls-key go together")
        }
        if let mb = try args.int("max-body-mb") {
            guard mb > 0 else { throw Arguments.UsageError(message: "--max-body-mb must be positive") }
            c.maxRequestBodyBytes = mb << 20
        }
        return c
    }

    /// Raises the soft limit of open descriptors towards `wanted` (at most the hard limit):
    /// each connection is a descriptor, and many held long polls are many connections.
    static func raiseDescriptorLimit(to wanted: Int) {
        var limit = rlimit()
        guard getrlimit(RLIMIT_NOFILE_RESOURCE, &limit) == 0, limit.rlim_cur < rlim_t(wanted) else { return }
        limit.rlim_cur = min(limit.rlim_max, rlim_t(wanted))
        _ = setrlimit(RLIMIT_NOFILE_RESOURCE, &limit)
    }

    static let serve = Command(
        name: "serve",
        synopsis: "lnote serve FOLDER [--token HEX | --new-token] [--port N] [--bind ADDR] [--url-host HOST] [--tls-cert PEM --tls-key PEM] [--max-connections N]",
        summary: "Serve a notebook folder so another machine can sync with it directly",
        details: """
        Binds to 127.0.0.1 unless --bind says otherwise (0.0.0.0 or :: for every address),
        and serves HTTPS with --tls-cert/--tls-key. Requests need the bearer token.
        The token and the port are kept in the folder's .lnote/serve.json (mode 0600), so the
        URL and token a peer saved keep working across restarts: the first start generates a
        token and prints it, and takes a free port; later starts reuse both (the token is
        then not printed again: lnote serve --new-token makes and prints a new one, and the
        old one stops working). --token (or $LNOTE_TOKEN) serves with a token of yours,
        which is kept too: 32 to 256 hex digits (at least 128 bits; make one with
        `openssl rand -hex 32`). --port serves on another port (0: any free port) and keeps it.
        Prints the notebook URL to pass to `lnote sync` (or `lnote remote add`): its host is
        --url-host when given (the name other machines reach this one by), else the bind
        address. Its notebook id comes from the folder's replica id, so it is the same at
        every start (a copied or moved folder gets a new one); a client using another id gets
        404 not_found. The folder owns its replica id: a push holding a new operation authored
        under it is refused (403 forbidden). The folder is not locked while served: lnote
        commands, an app or another serve may write to it meanwhile (each write takes the
        document's lock for its duration), and their changes wake held requests. A sync
        request may wait for changes (a long poll of at most 60 s, held without a thread;
        the folder's logs growing wakes it). At most --max-connections connections at once
        (default 128), --max-connections-per-ip from one address (default 32). Stops
        cleanly on SIGINT/SIGTERM: long polls held then are answered 503, which clients retry.
        A read-only web view of the notebook (its library with covers, each document's
        pages as SVG, its conflicts) is served too, behind the same token: open the URL
        of the view: line in a browser. The token travels in the URL's fragment
        (#token=...), which the browser never sends; the page's script removes it from
        the address bar and sends it as the bearer token. The view: line ends in
        #token=HEX when the token is printed (made or replaced now); else append #token=
        and the token (.lnote/serve.json) to it. The view uses no outside script, font
        or style (Protocol/sync-protocol.md §8).
        --json prints one line of JSON once serving, in place of the url, view and token
        lines: {"url": URL, "view_url": URL, "notebook": UUID, "folder": PATH, "port": N,
        "token": HEX (only when made or replaced now, as the token line; view_url then
        has the #token= fragment)}.
        """,
        options: serverOptions.union(["token", "url-host"]),
        flags: ["new-token", "json"],
        run: { args, console in
            try args.expect(1, "FOLDER")
            let folder = args.positionals[0]
            var config = try serverConfiguration(args)
            let signals = Signals.trap()
            try requireNotebook(folder)
            let saved = try ServeSettings.load(notebook: folder)
            let given = args.option("token") ?? ProcessInfo.processInfo.environment["LNOTE_TOKEN"].flatMap { $0.isEmpty ? nil : $0 }
            if given != nil && args.flag("new-token") {
                throw Arguments.UsageError(message: "--new-token makes a token: give it without --token (or $LNOTE_TOKEN)")
            }
            let token: String
            var printToken = false
            if let given, !given.isEmpty {
                // [SYNC-28] A short token can be guessed over the network: refused before the
                // folder is opened, by the check PeerServer makes too, as a usage error (exit 2).
                do { try RelayToken.checkServerToken(given) } catch let e as LnoteError {
                    let source = args.option("token") != nil ? "--token" : "$LNOTE_TOKEN"
                    throw Arguments.UsageError(message: "\(source): \(e.message), or give none and one is generated and printed")
                }
                token = given
            } else if let saved, !args.flag("new-token") {
                token = saved.token
            } else {
                token = RelayToken.generate()
                printToken = true
            }
            let portGiven = args.option("port") != nil
            if !portGiven, let saved { config.port = UInt16(saved.port) }
            let urlHost = args.option("url-host")
            if let urlHost, urlHost.isEmpty || !urlHost.unicodeScalars.allSatisfy({ $0.isASCII && ($0.properties.isAlphabetic || ("0"..."9").contains($0) || "-.:[]".unicodeScalars.contains($0)) }) {
                throw Arguments.UsageError(message: "--url-host needs a host name or address, got \"\(urlHost)\"")
            }
            let notebook = try await Notebook.open(at: folder)
            returnLargeBuffersToTheSystem()
            let server: PeerServer
            do {
                server = try PeerServer(notebook: notebook, token: token, configuration: config)
            } catch let e as LnoteError where e.code == .network && config.port != 0 {
                try? await notebook.close()
                let why = portGiven ? "" : " (where this folder was served before: the URL peers saved points there)"
                throw CLIError("cannot listen on port \(config.port)\(why): \(e.message). Stop the program using it, "
                               + "or pass --port N for another port (--port 0: any free port; peers then need the new URL)")
            } catch {
                try? await notebook.close()
                throw error
            }
            do {
                let settings = ServeSettings(token: token, port: Int(server.http.port))
                if settings != saved { try settings.save(notebook: folder) }
            } catch {
                try? server.close()
                try? await notebook.close()
                throw error
            }
            ServerLog(console: console, prefix: "lnote serve").attach(to: server.http)
            // [SYNC-91] The token goes into the view's URL only where it is printed anyway.
            let viewURL = publicBase(server, host: urlHost) + "/view/\(server.notebookID.uuidString)"
                + (printToken ? "#token=\(token)" : "")
            if args.flag("json") {
                var o: [String: CanonicalJSON] = ["url": .string(publicURL(server, host: urlHost)),
                                                  "view_url": .string(viewURL),
                                                  "notebook": .string(server.notebookID.uuidString),
                                                  "folder": .string(notebook.path), "port": .int(Int64(server.http.port))]
                if printToken { o["token"] = .string(token) }
                console.raw(CanonicalJSON.object(o).text(.compact) + "\n")
            } else {
                console.out("url: \(publicURL(server, host: urlHost))")
                console.out("view: \(viewURL)")
                if printToken { console.out("token: \(token)") }
            }
            console.flush()
            console.err("lnote serve: serving \(notebook.path) (replica \(notebook.replica)); Ctrl-C stops")
            if !printToken && given == nil {
                console.err("lnote serve: the token is the one saved in .lnote/serve.json; --new-token replaces it")
            }
            if urlHost == nil, ["0.0.0.0", "::"].contains(config.bindAddress) {
                console.err("lnote serve: listening on every address; other machines use this machine's name or address "
                            + "in the URL (--url-host \(ProcessInfo.processInfo.hostName) prints it so)")
            }
            let signal = await signals.wait()
            try server.close()
            try await notebook.close()
            console.err("lnote serve: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        })

    /// The server's notebook URL with `host` in place of the bind address.
    static func publicURL(_ server: PeerServer, host: String?) -> String {
        publicBase(server, host: host) + "/v1/notebooks/\(server.notebookID.uuidString)"
    }

    /// `scheme://host:port` of the server, with `host` in place of the bind address.
    static func publicBase(_ server: PeerServer, host: String?) -> String {
        guard let host else { return server.http.baseURL }
        let scheme = server.url.hasPrefix("https:") ? "https" : "http"
        let h = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(scheme)://\(h):\(server.http.port)"
    }
}

#if canImport(Glibc)
/// `RLIMIT_NOFILE` as `getrlimit` takes it.
let RLIMIT_NOFILE_RESOURCE = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#endif

/// The server's log on stderr ([SYNC-81]: the details of a 500 stay on the server, with the
/// incident id the client was given), each line escaped by `Console` (libmicrohttpd's
/// messages quote what clients sent). At most `perSecond` lines a second: a client that
/// makes the server log cannot flood the operator's terminal or log file; what was left out
/// is counted on the next line that goes through.
final class ServerLog: Sendable {
    private let console: Console
    private let prefix: String
    private let limit: Mutex<LogRateLimit>

    init(console: Console, prefix: String, perSecond: Int = 20) {
        self.console = console
        self.prefix = prefix
        limit = Mutex(LogRateLimit(perSecond: perSecond))
    }

    func attach(to server: HTTPServer) {
        server.setLogHandler { [self] message in self.log(message) }
    }

    func log(_ message: String) {
        let now = ContinuousClock.now
        guard let dropped = limit.withLock({ $0.admit(at: now) }) else { return }
        let trimmed = message.hasSuffix("\n") ? String(message.dropLast()) : message
        console.err("\(prefix): \(trimmed)" + (dropped > 0 ? " (\(dropped) earlier server messages not shown)" : ""))
    }
}
