import Foundation
import LnoteModel
import LnoteServer
import LnoteSync
import Testing

/// The openssl CLI, when installed.
let opensslPath: String? = ["/usr/bin/openssl", "/usr/local/bin/openssl", "/bin/openssl"]
    .first { FileManager.default.isExecutableFile(atPath: $0) }

/// Writes a self-signed certificate for 127.0.0.1/localhost and its key into `dir` with the
/// `openssl` CLI; nil (with the reason) when openssl is missing or fails.
func makeSelfSignedCertificate(in dir: String, name: String = "server") -> (cert: String, key: String)? {
    guard let openssl = opensslPath else {
        Issue.record("the openssl CLI is not installed")
        return nil
    }
    let cert = dir + "/\(name)-cert.pem"
    let key = dir + "/\(name)-key.pem"
    let process = Process()
    process.executableURL = URL(fileURLWithPath: openssl)
    process.arguments = ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
                         "-nodes", "-keyout", key, "-out", cert, "-days", "2", "-subj", "/CN=localhost",
                         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"]
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    do {
        try process.run()
        process.waitUntilExit()
    } catch {
        Issue.record("cannot run openssl: \(error)")
        return nil
    }
    guard process.terminationStatus == 0 else {
        Issue.record("openssl exited with \(process.terminationStatus)")
        return nil
    }
    return (cert, key)
}

@Suite("HTTPS")
struct HTTPTLSTests {
    @Test("https with a self-signed certificate: trusted CA file succeeds, default trust fails",
          .enabled(if: opensslPath != nil, "skipped: the openssl CLI is not installed"))
    func selfSigned() async throws {
        try await withTempDirectory { dir in
            guard let (cert, key) = makeSelfSignedCertificate(in: dir) else { return }
            let server = try HTTPServer(configuration: .init(tls: .init(certificatePath: cert, keyPath: key)),
                                        handler: echoHandler)
            defer { server.stop() }
            #expect(server.baseURL.hasPrefix("https://127.0.0.1:"))

            let trusting = try makeClient { $0.caFile = cert }
            defer { try? trusting.close() }
            let body: [UInt8] = Array(0...255)
            let ok = try await trusting.send(.post(server.baseURL + "/secure", body: body))
            #expect(ok.status == 200)
            #expect(ok.body == body)

            let plain = try makeClient()
            defer { try? plain.close() }
            do {
                _ = try await plain.send(.get(server.baseURL + "/secure"))
                Issue.record("self-signed certificate accepted without the CA")
            } catch let e as LnoteError {
                #expect(e.code == .network)
                #expect(e.underlying?.hasPrefix("CURLE_PEER_FAILED_VERIFICATION (60)") == true, "\(e)")
                #expect(!HTTPClient.isTransient(e))
            }

            // A different self-signed certificate as CA does not vouch for this one.
            guard let (otherCert, _) = makeSelfSignedCertificate(in: dir, name: "other") else { return }
            let wrong = try makeClient { $0.caFile = otherCert }
            defer { try? wrong.close() }
            await #expect(throws: LnoteError(.network)) { _ = try await wrong.send(.get(server.baseURL + "/secure")) }

            // The server still serves after failed handshakes.
            #expect(try await trusting.send(.get(server.baseURL + "/again")).status == 200)
        }
    }

    @Test("missing or bad TLS files fail at start with a clear error")
    func badTLSFiles() async throws {
        try await withTempDirectory { dir in
            #expect(throws: LnoteError(.notFound)) {
                _ = try HTTPServer(configuration: .init(tls: .init(certificatePath: dir + "/none.pem",
                                                                   keyPath: dir + "/none.pem")),
                                   handler: echoHandler)
            }
            let junk = dir + "/junk.pem"
            try "-----BEGIN CERTIFICATE-----\nnot base64\n-----END CERTIFICATE-----\n"
                .write(toFile: junk, atomically: true, encoding: .utf8)
            do {
                _ = try HTTPServer(configuration: .init(tls: .init(certificatePath: junk, keyPath: junk)),
                                   handler: echoHandler)
                Issue.record("server started with junk TLS material")
            } catch let e as LnoteError {
                #expect(e.code == .network, "\(e)")
            }
        }
    }
}
