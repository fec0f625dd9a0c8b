/// Every command, in the order `lnote --help` lists them.
enum CommandTable {
    static var all: [Command] {
        [sync, serve, relay, relayNotebookCreate, relayNotebookList, relayTokenCreate, relayTokenList, relayTokenRevoke, replay]
    }
}
