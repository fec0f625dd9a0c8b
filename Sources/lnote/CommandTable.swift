/// Every command, in the order `lnote --help` lists them.
enum CommandTable {
    static var all: [Command] {
        [initCommand, name, new, ls, show, title, docRemove, docRestore, rm, restore,
         pageAdd, pageRemove, pageRestore, pageMove,
         importStrokes, addImage, erase, eraseRange, move, front, back,
         restoreElement, undo, redo, revert,
         log, history, conflicts, compact, verify, watch,
         sync, remoteAdd, remoteList, remoteRemove, remoteDefault, serve,
         relay, relayNotebookCreate, relayNotebookList, relayNotebookRename, relayNotebookDelete, relayTokenCreate, relayTokenList, relayTokenRevoke,
         relayDevices, relayEpochReset, relayQuarantineList, relayQuarantineDrop, relayMigrate, relayStats, relayCopy,
         export, thumbnail, completion, demo, replay]
    }
}
