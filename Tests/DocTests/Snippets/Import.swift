// The import a reader writes first (Docs/GettingStarted.md); this file compiles it alone.

// snippet.getting-started-import
import Promises
// snippet.end
