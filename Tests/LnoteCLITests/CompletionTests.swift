import Foundation
import Testing
import LnoteTestSupport

/// Issue 18: `lnote completion bash` loaded in a real bash completes commands, flags,
/// documents and pages of the folder on the line.
@Suite("Shell completion")
struct CompletionTests {
    /// COMPREPLY after `_lnote` for the words typed (the last one being completed), in a bash
    /// that sourced the script, with the binary's folder first on PATH.
    func complete(_ sb: Sandbox, _ words: [String]) async throws -> [String] {
        let script = try await sb.ok("completion", "bash")
        try sb.write("completion.bash", script + "\n")
        let quoted = (["lnote"] + words).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        let program = """
        source completion.bash
        COMP_WORDS=(\(quoted)); COMP_CWORD=\(words.count)
        _lnote
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let bin = URL(fileURLWithPath: lnoteBinary).deletingLastPathComponent().path
        let r = try await Subprocess.run("/bin/bash", ["--noprofile", "--norc", "-c", program],
                                         environment: ["PATH": bin + ":/usr/bin:/bin"], directory: sb.path)
        #expect(r.code == 0 && r.errText.isEmpty, "bash: \(r.errText)")
        return r.outText.split(separator: "\n").map(String.init).sorted()
    }

    @Test("[issue 18] bash: commands, subcommands, flags, document ids and page positions")
    func bash() async throws {
        let sb = try Sandbox("completion")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--pages", "3")
        #expect(try await complete(sb, ["rel"]) == ["relay"])
        #expect(try await complete(sb, ["relay", "tok"]) == ["token"])
        #expect(try await complete(sb, ["relay", "token", "c"]) == ["create"])
        #expect(try await complete(sb, ["sync", "--w"]) == ["--wait", "--watch"])
        let folders = try await complete(sb, ["show", "n"])
        #expect(folders == ["nb"] || folders == ["nb/"], "\(folders)")
        #expect(try await complete(sb, ["show", "nb", String(doc.prefix(4))]) == [doc])
        #expect(try await complete(sb, ["show", "nb", String(doc.prefix(8)), "p"]) == ["p1", "p2", "p3"])
        #expect(try await complete(sb, ["show", "nb", doc, "--json", "p2"]) == ["p2"])
        try await sb.ok("remote", "add", "nb", "desktop", sb.sub("elsewhere"))
        #expect(try await complete(sb, ["sync", "nb", "des"]) == ["desktop"])
        // A folder that is not a notebook: no ids, no error.
        #expect(try await complete(sb, ["show", "nowhere", "a"]) == [])
    }

    @Test("[issue 18] zsh and fish scripts parse (when the shell is installed); an unknown shell is a usage error")
    func otherShells() async throws {
        let sb = try Sandbox("completion-shells")
        defer { sb.remove() }
        for (shell, path, check) in [("zsh", "/usr/bin/zsh", ["-n"]), ("fish", "/usr/bin/fish", ["--no-execute"])] {
            let script = try await sb.ok("completion", shell)
            #expect(script.contains("__complete"))
            guard FileManager.default.isExecutableFile(atPath: path) else { continue }
            try sb.write("c.\(shell)", script + "\n")
            let r = try await Subprocess.run(path, check + [sb.sub("c.\(shell)")])
            #expect(r.code == 0, "\(shell): \(r.errText)")
        }
        #expect(try await sb.run("completion", "tcsh").code == 2)
    }
}
