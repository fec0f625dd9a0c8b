import LnoteModel

/// The transports a scenario can run through, by name.
public enum ScenarioTransports {
    public static let names = ["memory", "folder"]

    public static func make(_ name: String) throws -> any ScenarioTransport {
        switch name {
        case "memory": return MemoryTransport()
        case "folder": return try FolderTransport()
        default:
            throw LnoteError(.invalidArgument, "unknown transport \"\(name)\" (have: \(names.joined(separator: ", ")))")
        }
    }
}
