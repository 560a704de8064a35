// expect-error: reasonable time
// Issue 22's first example as it was written: a ternary handed to then, on a literal promise.
// The known limit of the design (Docs/Design.md, "One verb per closure shape"): the literal
// leaves the promise's type open, so to refute 'then' the solver tries every integer type for
// 'id' in every operator of the ternary, and runs out of scopes (2^20, about 6 s here) before
// it reaches the overload that names 'map'; with no such overload at all it does the same
// (TypeCheck/RESULTS.md). With the type known (05) the message
// names 'map'; written with 'map' (corpus 04) it compiles in milliseconds.
import PromiseHTTP
import Promises

func misuse_04() {
  _ = Promise(8).then { id in id % 2 == 0 ? id / 2 : id * 3 + 1 }
}
