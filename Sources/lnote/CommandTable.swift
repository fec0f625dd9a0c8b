/// Every command, in the order `lnote --help` lists them.
enum CommandTable {
    static var all: [Command] {
        [replay]
    }
}
