/// The schema of an exported database (Protocol/sqlite-export.md, section 3).
enum ExportSchema {
    /// `PRAGMA user_version` and `meta.format_version` ([EXP-3]) of a file whose strokes all
    /// fit binary32 exactly: the original format, byte for byte.
    static let version: Int64 = 1
    /// The version of a file with at least one `exact` BLOB: format 1 plus the nullable
    /// `strokes.exact` column ([EXP-3], [EXP-28]). A reader that knows only format 1 refuses it
    /// rather than read approximate points as exact ones.
    static let exactVersion: Int64 = 2

    /// Turns a format-1 database into format 2, inside the export's transaction: the column
    /// is appended (rows already written read NULL), then the version is bumped.
    static let addExactColumn = "ALTER TABLE strokes ADD COLUMN exact BLOB"

    /// The `strokes` columns of each version, in order ([EXP-41] checks them).
    static func strokeColumns(version: Int64) -> [String] {
        let v1 = ["page_id", "element_id", "z", "created_ms", "tool", "color", "width_pt", "a", "b", "c", "d",
                  "tx_pt", "ty_pt", "point_count", "points", "radii", "erased"]
        return version == exactVersion ? v1 + ["exact"] : v1
    }
    /// `PRAGMA application_id`: "lnot" ([EXP-4]).
    static let applicationID: Int64 = 0x6C6E_6F74

    static let tables = ["meta", "documents", "pages", "strokes", "images", "assets"]

    static let ddl = """
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY NOT NULL,
        value TEXT NOT NULL
    );
    CREATE TABLE documents (
        id          TEXT PRIMARY KEY NOT NULL,
        title       TEXT NOT NULL,
        created_ms  INTEGER NOT NULL,
        modified_ms INTEGER NOT NULL,
        deleted     INTEGER NOT NULL CHECK (deleted IN (0, 1))
    );
    CREATE TABLE pages (
        id          TEXT PRIMARY KEY NOT NULL,
        document_id TEXT NOT NULL REFERENCES documents(id),
        position    INTEGER NOT NULL,
        width_pt    REAL NOT NULL,
        height_pt   REAL NOT NULL,
        created_ms  INTEGER NOT NULL,
        modified_ms INTEGER NOT NULL,
        deleted     INTEGER NOT NULL CHECK (deleted IN (0, 1)),
        UNIQUE (document_id, position)
    );
    CREATE TABLE assets (
        id    TEXT PRIMARY KEY NOT NULL,
        size  INTEGER NOT NULL,
        bytes BLOB NOT NULL
    );
    CREATE TABLE strokes (
        page_id     TEXT NOT NULL REFERENCES pages(id),
        element_id  TEXT NOT NULL,
        z           INTEGER NOT NULL,
        created_ms  INTEGER NOT NULL,
        tool        TEXT NOT NULL,
        color       TEXT NOT NULL,
        width_pt    REAL NOT NULL,
        a REAL NOT NULL, b REAL NOT NULL, c REAL NOT NULL, d REAL NOT NULL,
        tx_pt REAL NOT NULL, ty_pt REAL NOT NULL,
        point_count INTEGER NOT NULL,
        points      BLOB NOT NULL,
        radii       BLOB NOT NULL,
        erased      TEXT NOT NULL,
        PRIMARY KEY (page_id, element_id),
        UNIQUE (page_id, z)
    );
    CREATE TABLE images (
        page_id      TEXT NOT NULL REFERENCES pages(id),
        element_id   TEXT NOT NULL,
        z            INTEGER NOT NULL,
        created_ms   INTEGER NOT NULL,
        asset_id     TEXT NOT NULL REFERENCES assets(id),
        x_pt         REAL NOT NULL,
        y_pt         REAL NOT NULL,
        width_pt     REAL NOT NULL,
        height_pt    REAL NOT NULL,
        rotation_deg REAL NOT NULL,
        a REAL NOT NULL, b REAL NOT NULL, c REAL NOT NULL, d REAL NOT NULL,
        tx_pt REAL NOT NULL, ty_pt REAL NOT NULL,
        PRIMARY KEY (page_id, element_id),
        UNIQUE (page_id, z)
    );
    """
}
