import Foundation
import Testing
import LnoteTestSupport

/// Issue 18: `lnote completion bash` loaded in a real bash completes commands, flags,
/// documents and pages of the folder on the line.
@Suite("Shell completion")
struct CompletionTests {
    /// A word as bash splits it at COMP_WORDBREAKS, which holds ':' and '=' by default:
    /// `http://h:1` is `http`, `:`, `//h`, `:`, `1`; `--size=5` is `--size`, `=`, `5`.
    static func bashSplit(_ word: String) -> [String] {
        var out: [String] = []
        var current = ""
        for c in word {
            if c == ":" || c == "=" {
                if !current.isEmpty { out.append(current) }
                out.append(String(c))
                current = ""
            } else {
                current.append(c)
            }
        }
        if !current.isEmpty || out.isEmpty { out.append(current) }
        return out
    }

    /// COMPREPLY after `_lnote` for the words typed (the last one being completed), in a bash
    /// that sourced the script, with the binary's folder first on PATH: COMP_WORDS split as
    /// bash splits them (at ':' too), COMP_LINE and COMP_POINT as bash sets them.
    func complete(_ sb: Sandbox, _ words: [String], home: String? = nil) async throws -> [String] {
        let script = try await sb.ok("completion", "bash")
        try sb.write("completion.bash", script + "\n")
        func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let compWords = ["lnote"] + words.flatMap(Self.bashSplit)
        let line = (["lnote"] + words).joined(separator: " ")
        let program = """
        source completion.bash
        COMP_WORDBREAKS=$' \\t\\n"\\'><=;|&(:'
        COMP_WORDS=(\(compWords.map(quote).joined(separator: " "))); COMP_CWORD=\(compWords.count - 1)
        COMP_LINE=\(quote(line)); COMP_POINT=${#COMP_LINE}
        _lnote
        printf '%s\\n' "${COMPREPLY[@]}"
        """
        let bin = URL(fileURLWithPath: lnoteBinary).deletingLastPathComponent().path
        let r = try await Subprocess.run("/bin/bash", ["--noprofile", "--norc", "-c", program],
                                         environment: ["PATH": bin + ":/usr/bin:/bin"].merging(home.map { ["HOME": $0] } ?? [:]) { $1 },
                                         directory: sb.path)
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
        // A URL: bash splits it at each ':'; the words are joined back, and the candidates
        // given from its last ':' on, as bash then shows them after what is typed.
        let url = "http://127.0.0.1:8080/v1/notebooks/\(UUID().uuidString)"
        try await sb.ok("remote", "add", "nb", "home", url, "--token", String(repeating: "ab", count: 32))
        #expect(try await complete(sb, ["sync", "nb", "http://127.0.0.1:80"]) == [String(url.dropFirst("http://127.0.0.1:".count))])
        #expect(try await complete(sb, ["sync", "nb", "http:"]) == [String(url.dropFirst("http:".count))])
        #expect(try await complete(sb, ["sync", "nb", "ho"]) == ["home"])
        #expect(try await complete(sb, ["sync", "nb", url, "--to"]) == ["--token"])
        #expect(try await complete(sb, ["sync", url, "--ca-file", "x", "--in"]) == ["--init", "--interval"])
    }

    @Test("[issue 18] bash and zsh: a folder whose name holds a space, typed with a backslash or in quotes, completes and gives its ids and pages")
    func quotedFolders() async throws {
        let sb = try Sandbox("completion-quoted")
        defer { sb.remove() }
        try await sb.ok("init", "my notes")
        let doc = try await sb.ok("new", "my notes", "--pages", "2")
        for typed in ["my\\ notes", "'my notes'", "\"my notes\"", "my' 'notes", "~/my\\ notes"] {
            #expect(try await complete(sb, ["show", typed, String(doc.prefix(4))], home: sb.path) == [doc], "bash: \(typed)")
            #expect(try await complete(sb, ["show", typed, String(doc.prefix(8)), "p"], home: sb.path) == ["p1", "p2"], "bash: \(typed)")
            #expect(try await zshComplete(sb, ["show", typed, String(doc.prefix(4))], home: sb.path) == [doc], "zsh: \(typed)")
        }
        // The folder itself: compgen is given the word unquoted.
        let folders = try await complete(sb, ["show", "my\\ no"])
        #expect(folders == ["my notes"] || folders == ["my notes/"], "\(folders)")
        #expect(try await complete(sb, ["show", "'my no"]).contains { $0.hasPrefix("my notes") })
    }

    /// The shell at `path`, or a failure saying how to install it (CI installs both).
    static func shell(_ path: String) throws -> String {
        try #require(FileManager.default.isExecutableFile(atPath: path),
                     "\(path) is missing: scripts/setup.sh --deps-only installs zsh and fish (the completion tests run them)")
        return path
    }

    /// What the zsh script adds for `words` (the last one being completed): `_lnote` run in
    /// a real zsh that sourced the script, with compadd, _files and compdef standing in for
    /// the completion system's (they only work inside a completion widget).
    func zshComplete(_ sb: Sandbox, _ words: [String], home: String? = nil) async throws -> [String] {
        try sb.write("c.zsh", try await sb.ok("completion", "zsh") + "\n")
        func quote(_ s: String) -> String { "'" + s.replacingOccurrences(of: "'", with: "'\\''") + "'" }
        let program = """
        compdef() { : }
        compadd() { [[ $1 == -a ]] && print -rl -- "${(@P)2}" }
        _files() { print -r -- __files__ }
        compset() { print -r -- "compset $*" }
        source ./c.zsh
        words=(lnote \(words.map(quote).joined(separator: " "))); CURRENT=\(words.count + 1); PREFIX=${words[CURRENT]}
        _lnote
        """
        let bin = URL(fileURLWithPath: lnoteBinary).deletingLastPathComponent().path
        let r = try await Subprocess.run(try Self.shell("/usr/bin/zsh"), ["-f", "-c", program],
                                         environment: ["PATH": bin + ":/usr/bin:/bin"].merging(home.map { ["HOME": $0] } ?? [:]) { $1 },
                                         directory: sb.path)
        #expect(r.code == 0 && r.errText.isEmpty, "zsh: \(r.errText)")
        return r.outText.split(separator: "\n").map(String.init).sorted()
    }

    /// What fish completes for the command line `line` (`complete -C`, fish's own completion
    /// of a line, after the script was sourced).
    func fishComplete(_ sb: Sandbox, _ line: String) async throws -> [String] {
        try sb.write("c.fish", try await sb.ok("completion", "fish") + "\n")
        let bin = URL(fileURLWithPath: lnoteBinary).deletingLastPathComponent().path
        let r = try await Subprocess.run(try Self.shell("/usr/bin/fish"),
                                         ["--no-config", "-c", "source c.fish; complete -C '\(line)'"],
                                         environment: ["PATH": bin + ":/usr/bin:/bin", "HOME": sb.path], directory: sb.path)
        #expect(r.code == 0 && r.errText.isEmpty, "fish: \(r.errText)")
        return r.outText.split(separator: "\n").map { String($0.split(separator: "\t").first ?? "") }.sorted()
    }

    @Test("[issue 18] zsh: the script loads and completes commands, subcommands, flags, document ids and pages")
    func zsh() async throws {
        let sb = try Sandbox("completion-zsh")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--pages", "2")
        #expect(try await zshComplete(sb, ["rel"]).contains("relay"))
        #expect(try await zshComplete(sb, ["relay", "token", "c"]) == ["create"])
        #expect(try await zshComplete(sb, ["sync", "--w"]) == ["--wait", "--watch"])
        #expect(try await zshComplete(sb, ["show", "nb", String(doc.prefix(4))]) == [doc])
        #expect(try await zshComplete(sb, ["show", "nb", String(doc.prefix(8)), "p"]) == ["p1", "p2"])
        #expect(try await zshComplete(sb, ["show", "n"]) == ["__files__"], "a folder: the shell's own")
    }

    @Test("[issue 18] fish: the script loads and completes commands, subcommands, flags, document ids and pages")
    func fish() async throws {
        let sb = try Sandbox("completion-fish")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        let doc = try await sb.ok("new", "nb", "--pages", "2")
        #expect(try await fishComplete(sb, "lnote rel").contains("relay"))
        #expect(try await fishComplete(sb, "lnote relay token c") == ["create"])
        #expect(try await fishComplete(sb, "lnote sync --w") == ["--wait", "--watch"])
        #expect(try await fishComplete(sb, "lnote show nb \(doc.prefix(4))") == [doc])
        #expect(try await fishComplete(sb, "lnote show nb \(doc.prefix(8)) p") == ["p1", "p2"])
    }

    @Test("[issue 18] --opt=value: the value completes as a file, and the positionals after it keep their places")
    func optionValues() async throws {
        let sb = try Sandbox("completion-optvalue")
        defer { sb.remove() }
        try await sb.ok("init", "nb")
        try await sb.ok("remote", "add", "nb", "desktop", sb.sub("elsewhere"))
        try FileManager.default.createDirectory(atPath: sb.sub("out"), withIntermediateDirectories: true)
        try sb.write("outline.txt", "x")
        // bash splits --render=ou into --render, =, ou: the words are joined back, the value
        // is completed, and the candidates are what bash puts after the '='.
        let value = try await complete(sb, ["conflicts", "nb", "--render=ou"])
        #expect(value == ["out", "outline.txt"] || value == ["out/", "outline.txt"], "\(value)")
        let empty = try await complete(sb, ["conflicts", "nb", "--render="])
        #expect(empty.contains("out") || empty.contains("out/"), "\(empty)")
        // Before: --render took '=' as its value and "5" became the folder.
        #expect(try await complete(sb, ["sync", "--interval=5", "nb", "des"]) == ["desktop"])
        #expect(try await complete(sb, ["sync", "--interval=5", "--w"]) == ["--wait", "--watch"])
        // A flag that takes no value, or an unknown option: nothing.
        #expect(try await complete(sb, ["sync", "--watch=ou"]) == [])
        #expect(try await complete(sb, ["sync", "--nope=ou"]) == [])
        #expect(try await zshComplete(sb, ["conflicts", "nb", "--render=ou"]) == ["__files__", "compset -P *="])
        #expect(try await zshComplete(sb, ["sync", "--interval=5", "nb", "des"]) == ["__files__", "desktop"])
        let fish = try await fishComplete(sb, "lnote conflicts nb --render=ou")
        #expect(fish.contains("--render=out/") && fish.contains("--render=outline.txt"), "\(fish)")
        // Without an option before it, a file completes as itself.
        let plain = try await fishComplete(sb, "lnote conflicts nb --render ou")
        #expect(plain.contains("out/") && plain.contains("outline.txt"), "\(plain)")
    }

    @Test("[issue 18] the zsh and fish scripts parse; an unknown shell is a usage error")
    func otherShells() async throws {
        let sb = try Sandbox("completion-shells")
        defer { sb.remove() }
        for (shell, path, check) in [("zsh", "/usr/bin/zsh", ["-n"]), ("fish", "/usr/bin/fish", ["--no-execute"])] {
            let script = try await sb.ok("completion", shell)
            #expect(script.contains("__complete"))
            try sb.write("c.\(shell)", script + "\n")
            let r = try await Subprocess.run(try Self.shell(path), check + [sb.sub("c.\(shell)")])
            #expect(r.code == 0, "\(shell): \(r.errText)")
        }
        #expect(try await sb.run("completion", "tcsh").code == 2)
    }
}
