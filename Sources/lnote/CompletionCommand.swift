import Foundation
import LnoteModel
import LnoteStore

/// `lnote completion bash|zsh|fish` prints a script that completes commands, flags, and the
/// document and page ids of the folder named on the line. The scripts ask the binary
/// (`lnote __complete`), so they never fall out of step with the commands it has.
extension CommandTable {
    static let completion = Command(
        name: "completion",
        synopsis: "lnote completion bash|zsh|fish",
        summary: "Print a shell completion script",
        details: """
        Completes command names, subcommands, flags, document ids (from the folder named on
        the line), page positions (p1, p2, …), saved remote names, and folders. Load it:
          bash   source <(lnote completion bash)        (or save it under
                 /etc/bash_completion.d/lnote)
          zsh    source <(lnote completion zsh)         (after compinit)
          fish   lnote completion fish | source
        The script runs `lnote __complete` as you press Tab: reading a folder's manifests
        only, without locking it.
        """,
        run: { args, console in
            try args.expect(1, "bash|zsh|fish")
            switch args.positionals[0] {
            case "bash": console.stdout.write(Completion.bash)
            case "zsh": console.stdout.write(Completion.zsh)
            case "fish": console.stdout.write(Completion.fish)
            default: throw Arguments.UsageError(message: "unknown shell \"\(args.positionals[0])\": bash, zsh or fish")
            }
            return Exit.ok
        })
}

/// `lnote __complete CWORD WORD…` (what the scripts call; not a listed command, and read
/// raw: the words typed may hold any flag): the candidates for word CWORD (0 = the word
/// after `lnote`), one per line; `__dirs__` / `__files__` ask the shell to add directories /
/// files. Never fails: a folder that cannot be read gives no ids.
enum Completion {
    static func run(_ args: [String], console: Console) -> Int32 {
        // `--typed`: the words as the line holds them (bash's COMP_WORDS), quoting included;
        // their quotes are removed here, and the word being completed is given back first
        // (`__word__ TEXT`) for the shell's own file completion.
        var args = args
        let typed = args.first == "--typed"
        if typed { args.removeFirst() }
        guard let cword = args.first.flatMap({ Int($0) }), cword >= 0 else { return Exit.usage }
        var words = Array(args.dropFirst())
        if typed {
            // Unquoted, `~` left as typed: compgen expands it itself, and a candidate must
            // begin with what the line holds.
            // `--opt=value`: the value is the word compgen completes (bash shows candidates
            // after the '=', one of its word breaks).
            let word = cword < words.count ? dequoted(words[cword], home: false) : ""
            console.stdout.write("__word__ " + (optionValue(word)?.value ?? word) + "\n")
            words = words.map { dequoted($0) }
        } else {
            // zsh and fish remove the quoting themselves; `~/` is still to expand.
            words = words.map(homeExpanded)
        }
        for c in candidates(cword: cword, words: words) { console.stdout.write(c + "\n") }
        return Exit.ok
    }

    /// A word as typed on a shell's line, its quoting removed as the shell would: a
    /// backslash outside quotes takes the next character as is, '…' is literal, "…" takes
    /// a backslash only before $ ` " \ and a newline; a quote left open runs to the end (the
    /// word is still being typed). With `home`, a leading `~` or `~/` is the home folder.
    static func dequoted(_ word: String, home: Bool = true) -> String {
        enum Quote { case none, single, double }
        let c = Array(word)
        var out = "", q = Quote.none, k = 0
        while k < c.count {
            let ch = c[k], next: Character? = k + 1 < c.count ? c[k + 1] : nil
            switch q {
            case .none where ch == "\\":
                if let next { out.append(next) }
                k += 1
            case .double where ch == "\\" && next.map({ "$`\"\\\n".contains($0) }) == true:
                out.append(next!)
                k += 1
            case .none where ch == "'": q = .single
            case .none where ch == "\"": q = .double
            case .single where ch == "'", .double where ch == "\"": q = .none
            default: out.append(ch)
            }
            k += 1
        }
        return home && (word == "~" || word.hasPrefix("~/")) ? homeExpanded(out) : out
    }

    /// `~` or `~/…` with the home folder in place of `~`; any other word as it is.
    static func homeExpanded(_ word: String) -> String {
        guard word == "~" || word.hasPrefix("~/"), let dir = ProcessInfo.processInfo.environment["HOME"] else { return word }
        return dir + word.dropFirst()
    }

    /// The candidates for `words[cword]` (the word being completed, possibly empty).
    static func candidates(cword: Int, words: [String]) -> [String] {
        let typed = Array(words.prefix(cword))
        let current = cword < words.count ? words[cword] : ""
        let commands = CommandTable.all
        // The command whose name the typed words start with (the longest one).
        let command = commands.filter { c in
            let n = c.name.split(separator: " ").map(String.init)
            return typed.count >= n.count && Array(typed.prefix(n.count)) == n
        }.max { $0.name.count < $1.name.count }
        // Still naming the command: the next word of each name that continues the typed ones.
        let nextWords = Set(commands.compactMap { c -> String? in
            let n = c.name.split(separator: " ").map(String.init)
            guard n.count > typed.count, Array(n.prefix(typed.count)) == typed else { return nil }
            return n[typed.count]
        })
        guard let command else { return (nextWords.sorted() + (typed.isEmpty ? ["help"] : [])).filter { $0.hasPrefix(current) } }
        let nameCount = command.name.split(separator: " ").count
        var out = nextWords.sorted().filter { $0.hasPrefix(current) && !current.isEmpty }
        // `--opt=value` of an option that takes a value: a file (as for `--opt value`).
        if let (name, _) = optionValue(current) {
            return command.options.contains(name) ? ["__files__"] : []
        }
        if current.hasPrefix("-") {
            return (command.options.map { "--" + $0 } + command.flags.map { "--" + $0 } + ["--help"]).sorted()
                .filter { $0.hasPrefix(current) }
        }
        // The previous word an option that takes a value: a file or a value.
        if let last = typed.last, last.hasPrefix("--"), command.options.contains(String(last.dropFirst(2))) {
            return ["__files__"]
        }
        // Which positional this is, option values left out.
        var positionals: [String] = []
        var i = nameCount
        while i < typed.count {
            let w = typed[i]
            if w.hasPrefix("--") {
                let name = String(w.dropFirst(2).prefix { $0 != "=" })
                if command.options.contains(name), !w.contains("=") { i += 1 }
            } else {
                positionals.append(w)
            }
            i += 1
        }
        let roles = positionalRoles(command)
        let role = positionals.count < roles.count ? roles[positionals.count] : roles.last ?? ""
        let folder = roles.firstIndex(of: "FOLDER").flatMap { $0 < positionals.count ? positionals[$0] : nil }
        switch role {
        case "FOLDER", "DIR":
            out.append("__dirs__")
        case "DOC":
            if let folder, let list = try? Notebook.list(at: folder) {
                out += list.map(\.id.description).filter { $0.lowercased().hasPrefix(current.lowercased()) }
            }
        case "PAGE":
            if let folder, let docIndex = roles.firstIndex(of: "DOC"), docIndex < positionals.count,
               let list = try? Notebook.list(at: folder) {
                let key = positionals[docIndex].lowercased()
                let matching = list.filter { $0.id.description.lowercased().hasPrefix(key) }
                if matching.count == 1 {
                    out += (0..<matching[0].pageCount).map { "p\($0 + 1)" }.filter { $0.hasPrefix(current) }
                }
            }
        case "REMOTE", "URL-or-FOLDER", "OTHER":
            let base = folder ?? (isNotebook(".") ? "." : nil)
            if let base, let saved = try? SavedRemotes.load(notebook: base) {
                out += saved.remotes.map { $0.name }.filter { $0.hasPrefix(current) }
                // The URLs saved (a remote of another folder's name is often typed as its URL).
                if current.contains(":") {
                    out += Set(saved.remotes.map(\.location).filter { SyncRunner.isURL($0) && $0.hasPrefix(current) }).sorted()
                }
            }
            out.append("__dirs__")
        case "":
            break
        default:
            out.append("__files__")
        }
        return out
    }

    /// `--name=value` split at its first '=' (nil for any other word).
    static func optionValue(_ word: String) -> (name: String, value: String)? {
        guard word.hasPrefix("--"), let eq = word.firstIndex(of: "=") else { return nil }
        return (String(word[word.index(word.startIndex, offsetBy: 2)..<eq]), String(word[word.index(after: eq)...]))
    }

    static func isNotebook(_ path: String) -> Bool { FileManager.default.fileExists(atPath: path + "/.lnote") }

    /// The positionals a synopsis names, in order: its upper-case words outside option
    /// groups (`FOLDER DOC [PAGE]`, `[FOLDER] [REMOTE]`).
    static func positionalRoles(_ c: Command) -> [String] {
        let words = c.synopsis.split(separator: " ").dropFirst(1 + c.name.split(separator: " ").count)
        var roles: [String] = []
        var depth = 0
        var optionGroup = false
        for w in words {
            let opens = w.filter { $0 == "[" || $0 == "(" }.count, closes = w.filter { $0 == "]" || $0 == ")" }.count
            let bare = w.trimmingCharacters(in: CharacterSet(charactersIn: "[]().,"))
            if depth == 0 { optionGroup = bare.hasPrefix("-") }
            if !optionGroup, !bare.isEmpty, bare.first!.isUppercase, !bare.hasPrefix("-"), !bare.contains("|") {
                roles.append(bare.hasSuffix("...") ? String(bare.dropLast(3)) : bare)
            }
            depth += opens - closes
            if depth <= 0 { depth = 0; optionGroup = false }
        }
        return roles
    }

    static let bash = #"""
    # lnote completion for bash: source <(lnote completion bash)
    # COMP_WORDBREAKS holds ':' and '=' by default, so bash splits http://host:8080/… and
    # --opt=value into several words: _lnote_words joins them back (the words of COMP_LINE
    # that touch a ':' or a '='), and the candidates lose what precedes the last ':' of the
    # word (bash puts them after it), as bash-completion's __ltrim_colon_completions does,
    # without needing bash-completion. For --opt=value, lnote gives back the value alone
    # (__word__), which is what bash replaces.
    _lnote_words() {
        local line=$COMP_LINE pos=0 i n w rest gap
        _lnote_w=() _lnote_cword=0
        for ((i = 0; i < ${#COMP_WORDS[@]}; i++)); do
            w=${COMP_WORDS[i]}
            rest=${line:pos}
            gap=${rest%%[![:space:]]*}
            pos=$((pos + ${#gap}))
            # (No negative subscripts: bash 3.2 and 4.2 refuse them.)
            n=${#_lnote_w[@]}
            if ((i > 0 && ${#gap} == 0)) && [[ $w == [:=]* || ${_lnote_w[n-1]} == *[:=] ]]; then
                _lnote_w[n-1]+=$w
            else
                _lnote_w+=("$w")
            fi
            pos=$((pos + ${#w}))
            ((i == COMP_CWORD)) && _lnote_cword=$((${#_lnote_w[@]} - 1))
        done
    }
    _lnote() {
        local line dirs=0 files=0 _lnote_cword
        local -a words=() _lnote_w
        _lnote_words
        local cur=${_lnote_w[_lnote_cword]} word
        word=$cur
        # --typed: lnote removes the words' quoting (a folder typed as my\ notes or 'my notes')
        # and gives the word back unquoted (__word__) for compgen, which does not unquote.
        while IFS= read -r line; do
            case $line in
                __dirs__) dirs=1 ;;
                __files__) files=1 ;;
                "__word__ "*) word=${line#"__word__ "} ;;
                ?*) words+=("$line") ;;
            esac
        done < <(lnote __complete --typed "$((_lnote_cword - 1))" "${_lnote_w[@]:1}" 2>/dev/null)
        COMPREPLY=()
        local w i colon
        for w in "${words[@]}"; do [[ $w == "$cur"* ]] && COMPREPLY+=("$w"); done
        # lnote's candidates complete the whole word, compgen's the word lnote gave back:
        # each loses what precedes the last ':' of the word it completes.
        _lnote_trim() {
            [[ $1 == *:* && $COMP_WORDBREAKS == *:* ]] || return 0
            colon=${1%"${1##*:}"}
            for ((i = $2; i < ${#COMPREPLY[@]}; i++)); do COMPREPLY[i]=${COMPREPLY[i]#"$colon"}; done
        }
        _lnote_trim "$cur" 0
        local n=${#COMPREPLY[@]} IFS=$'\n'
        if ((dirs)); then COMPREPLY+=($(compgen -d -- "$word")); fi
        if ((files)); then COMPREPLY+=($(compgen -f -- "$word")); fi
        _lnote_trim "$word" "$n"
    }
    complete -o filenames -F _lnote lnote

    """#

    static let zsh = #"""
    #compdef lnote
    # lnote completion for zsh: source <(lnote completion zsh), after compinit
    _lnote() {
        local line dirs=0 files=0
        local -a cands
        for line in "${(@f)$(lnote __complete $((CURRENT - 2)) "${(@Q)words[2,-1]}" 2>/dev/null)}"; do
            case $line in
                __dirs__) dirs=1 ;;
                __files__) files=1 ;;
                ?*) cands+=("$line") ;;
            esac
        done
        (( ${#cands} )) && compadd -a cands
        # --opt=value: the value is what is completed.
        (( dirs + files )) && [[ $PREFIX == --*=* ]] && compset -P '*='
        (( dirs )) && _files -/
        (( files )) && _files
        return 0
    }
    compdef _lnote lnote

    """#

    static let fish = #"""
    # lnote completion for fish: lnote completion fish | source
    function __lnote_complete
        set -l tokens (commandline -opc)
        set -l cur (commandline -ct)
        set -l cword (math (count $tokens) - 1)
        for line in (lnote __complete $cword $tokens[2..-1] $cur 2>/dev/null)
            switch $line
                case __dirs__
                    __fish_complete_directories $cur
                case __files__
                    # --opt=value: the value completed, given back after the option.
                    set -l opt (string match -r -- '^--[^=]*=' $cur)
                    for p in (__fish_complete_path (string replace -r -- '^--[^=]*=' '' $cur))
                        printf '%s%s\n' "$opt" $p
                    end
                case '*'
                    echo $line
            end
        end
    end
    complete -c lnote -f -a '(__lnote_complete)'

    """#
}
