#include "CPromisesSupport.h"

// Defined here, once: a `static` variable in the header would be one per object file that
// inlines the functions above (a release build splits the module into one object per file).
// `nodebug`: valgrind 3.19 gives up on the whole executable at clang 21's DWARF 5 description
// of a thread-local variable, and callgrind is how Docs/Performance.md counts instructions.
__attribute__((nodebug)) __thread void *promises_current_drain = 0;
