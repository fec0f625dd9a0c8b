/// A parsed command line: positionals in order, options by name, flags.
///
/// Options are `--name value` or `--name=value`; flags are `--name`. What is an option and
/// what is a flag is declared by the command, so `--json FILE` and `--json` never mix.
struct Arguments {
    var positionals: [String] = []
    var options: [String: [String]] = [:]
    var flags: Set<String> = []

    /// Thrown for bad usage; the CLI prints it with the command's synopsis and exits 2.
    struct UsageError: Error, CustomStringConvertible {
        var message: String
        var description: String { message }
    }

    init(_ args: [String], options known: Set<String>, flags knownFlags: Set<String>) throws {
        var i = 0
        var onlyPositionals = false
        while i < args.count {
            let a = args[i]
            i += 1
            if onlyPositionals || !a.hasPrefix("-") || a == "-" {
                positionals.append(a)
                continue
            }
            if a == "--" { onlyPositionals = true; continue }
            var name = a.hasPrefix("--") ? String(a.dropFirst(2)) : String(a.dropFirst())
            var inline: String? = nil
            if let eq = name.firstIndex(of: "=") {
                inline = String(name[name.index(after: eq)...])
                name = String(name[..<eq])
            }
            // Short forms of the common ones, where the command has the long one.
            if !a.hasPrefix("--"), let long = Arguments.shortForms[name], knownFlags.contains(long) || known.contains(long) {
                name = long
            }
            if knownFlags.contains(name) {
                guard inline == nil else { throw UsageError(message: "--\(name) takes no value") }
                flags.insert(name)
            } else if known.contains(name) {
                let value: String
                if let inline { value = inline } else {
                    guard i < args.count else { throw UsageError(message: "--\(name) needs a value") }
                    value = args[i]
                    i += 1
                }
                options[name, default: []].append(value)
            } else {
                throw UsageError(message: "unknown option \(a)")
            }
        }
    }

    /// `-h`, `-j`, `-q`, `-o FILE`.
    static let shortForms = ["h": "help", "j": "json", "q": "quiet", "o": "out"]

    func flag(_ n: String) -> Bool { flags.contains(n) }
    func option(_ n: String) -> String? { options[n]?.last }

    func int(_ n: String) throws -> Int? {
        guard let s = option(n) else { return nil }
        guard let v = Int(s) else { throw UsageError(message: "--\(n) needs a whole number, got \"\(s)\"") }
        return v
    }

    func double(_ n: String) throws -> Double? {
        guard let s = option(n) else { return nil }
        guard let v = Double(s), v.isFinite else { throw UsageError(message: "--\(n) needs a number, got \"\(s)\"") }
        return v
    }

    /// Exactly `count` positionals (or between `count` and `max`).
    func expect(_ count: Int, max: Int? = nil, _ names: String) throws {
        let hi = max ?? count
        guard (count...hi).contains(positionals.count) else {
            throw UsageError(message: "expected \(names)")
        }
    }
}
