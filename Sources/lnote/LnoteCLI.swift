import Foundation
import LnoteModel

/// `lnote`: the command-line face of the library. Every command goes through the public
/// API an app would use; this target only parses arguments and prints.
@main
struct LnoteCLI {
    static let commands: [Command] = CommandTable.all

    static func main() async {
        let code = await run(Array(CommandLine.arguments.dropFirst()))
        exit(code)
    }

    static func usage() -> String {
        var s = "usage: lnote COMMAND [ARGS] (lnote COMMAND --help for details)\n\ncommands:\n"
        let width = commands.map(\.name.count).max() ?? 10
        for c in commands {
            s += "  " + c.name.padding(toLength: width + 2, withPad: " ", startingAt: 0) + c.summary + "\n"
        }
        s += """

        exit status: 0 done; 1 failed (a file, id, page or state the command cannot use: the
        message names it); 2 usage (a command, argument or option that is not one: nothing is
        changed); 3 done, but something needs a person (lnote sync: a fork, a quarantined
        operation). A command's --help says where it differs (verify, replay).

        """
        return s
    }

    static func run(_ arguments: [String]) async -> Int32 {
        let console = Console()
        let code = await run(arguments, console)
        // Every way out (a result, a usage error, a failure) writes out what stdout holds.
        console.flush()
        // Output that could not be written (a full disk): the command's work is done, its
        // output lost, which a script must learn (exit 1), not a crash.
        if let reason = StandardOutput.shared.failure {
            console.err("lnote: standard output could not be written (\(reason)); "
                        + (StandardOutput.shared.stoppedByFailure ? "it stopped"
                           : code == Exit.ok || code == Exit.attention ? "the command itself was done" : "the command had failed"))
            return code == Exit.ok || code == Exit.attention ? Exit.failure : code
        }
        return code
    }

    private static func run(_ arguments: [String], _ console: Console) async -> Int32 {
        var args = arguments
        // `lnote help CMD …` is `lnote CMD … --help`.
        if args.count > 1, args[0] == "help" { args = Array(args.dropFirst()) + ["--help"] }
        if args.isEmpty || args == ["--help"] || args == ["-h"] || args == ["help"] {
            // Asked for: stdout, exit 0. Nothing given: a usage error (stderr, exit 2).
            if args.isEmpty { console.errLines(usage()); return Exit.usage }
            console.outLines(usage())
            return Exit.ok
        }
        if args.first == "__complete" { return Completion.run(Array(args.dropFirst()), console: console) }
        if args == ["--version"] {
            console.out("lnote \(LnoteVersion.string)")
            return Exit.ok
        }
        // A group of commands named alone or with --help ("lnote relay token --help"): its
        // commands, even when a shorter command ("relay") would take the words as arguments.
        let words = args.last == "--help" || args.last == "-h" ? Array(args.dropLast()) : args
        let groupWords = words.joined(separator: " ")
        if !commands.contains(where: { $0.name == groupWords }) {
            let group = commands.filter { $0.name.hasPrefix(groupWords + " ") }
            if words.count > 1, !group.isEmpty {
                let lines = group.map { "  \($0.synopsis)\n      \($0.summary)" }.joined(separator: "\n")
                if words.count < args.count {
                    console.outLines("commands of lnote \(groupWords):\n\(lines)")
                    return Exit.ok
                }
                console.errLines("lnote: \"\(groupWords)\" needs a subcommand; one of:\n\(lines)")
                return Exit.usage
            }
        }
        // The longest command name that prefixes the arguments ("page add" before "page").
        let match = commands
            .filter { c in
                let words = c.name.split(separator: " ").map(String.init)
                return args.count >= words.count && Array(args.prefix(words.count)) == words
            }
            .max { $0.name.count < $1.name.count }
        guard let command = match else {
            // A group word alone ("lnote page"): list its commands.
            let group = commands.filter { $0.name.hasPrefix(args[0] + " ") }
            if !group.isEmpty {
                let helpAsked = args.count == 2 && (args[1] == "--help" || args[1] == "-h")
                let lines = group.map { "  \($0.synopsis)\n      \($0.summary)" }.joined(separator: "\n")
                if helpAsked {
                    console.outLines("commands of lnote \(args[0]):\n\(lines)")
                    return Exit.ok
                }
                let what = args.count > 1 ? "unknown command \"\(args[0]) \(args[1])\"" : "\"\(args[0])\" needs a subcommand"
                console.errLines("lnote: \(what); one of:\n\(lines)")
                return Exit.usage
            }
            console.err("lnote: unknown command \"\(args[0])\"; run lnote --help")
            return Exit.usage
        }
        let rest = Array(args.dropFirst(command.name.split(separator: " ").count))
        do {
            let parsed = try Arguments(rest, options: command.options, flags: command.flags.union(["help"]))
            if parsed.flag("help") {
                console.outLines(command.help)
                return Exit.ok
            }
            return try await command.run(parsed, console)
        } catch let e as Arguments.UsageError {
            console.err("lnote \(command.name): \(e.message)")
            console.err("usage: \(command.synopsis)")
            return Exit.usage
        } catch let e as CLIError {
            console.err("lnote \(command.name): \(e.description)")
            return e.code
        } catch let e as LnoteError {
            console.err("lnote \(command.name): \(e.forPeople)")
            return Exit.failure
        } catch {
            console.err("lnote \(command.name): \(describeForPeople(error))")
            return Exit.failure
        }
    }
}

enum LnoteVersion {
    static let string = "0.1.0"
}
