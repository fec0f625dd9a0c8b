import Foundation
import LnoteModel
import LnoteStore
import LnoteSync
import LnoteServer

extension CommandTable {
    static let serverOptions: Set<String> = ["port", "bind", "tls-cert", "tls-key", "max-body-mb"]

    static func serverConfiguration(_ args: Arguments) throws -> HTTPServer.Configuration {
        var c = HTTPServer.Configuration()
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

    static let serve = Command(
        name: "serve",
        synopsis: "lnote serve FOLDER [--token T] [--port N] [--bind ADDR] [--tls-cert PEM --tls-key PEM]",
        summary: "Serve a notebook folder so another machine can sync with it directly",
        details: """
        Binds to 127.0.0.1 (port 0: any free port) unless --bind says otherwise, and serves
        HTTPS with --tls-cert/--tls-key. Requests need the bearer token: give one with --token
        (or $LNOTE_TOKEN), or one is generated and printed. Prints the notebook URL to pass to
        `lnote sync`: its notebook id comes from the folder's replica id, so it is the same at
        every start (a copied or moved folder gets a new one); a client using another id gets
        404 not_found. The folder owns its replica id: a push holding a new operation authored
        under it is refused (403 forbidden). The folder stays locked while served. Stops cleanly
        on SIGINT/SIGTERM.
        """,
        options: serverOptions.union(["token"]),
        run: { args, console in
            try args.expect(1, "FOLDER")
            let config = try serverConfiguration(args)
            let signals = Signals.trap()
            var token = args.option("token") ?? ProcessInfo.processInfo.environment["LNOTE_TOKEN"] ?? ""
            let generated = token.isEmpty
            if generated { token = RelayToken.generate() }
            try requireNotebook(args.positionals[0])
            let notebook = try await Notebook.open(at: args.positionals[0])
            let server: PeerServer
            do { server = try PeerServer(notebook: notebook, token: token, configuration: config) } catch {
                try? await notebook.close()
                throw error
            }
            console.out("url: \(server.url)")
            if generated { console.out("token: \(token)") }
            console.err("lnote serve: serving \(notebook.path) (replica \(notebook.replica)); Ctrl-C stops")
            let signal = await signals.wait()
            try server.close()
            try await notebook.close()
            console.err("lnote serve: stopped (\(signal == SIGINT ? "SIGINT" : "SIGTERM"))")
            return Exit.ok
        })
}
