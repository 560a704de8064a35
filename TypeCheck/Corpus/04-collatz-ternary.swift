// Value step, one expression: a ternary of arithmetic on an Int literal promise (issue 22's first example).
import Promises

func chain_04() {
  let next = Promise(8).map { id in id % 2 == 0 ? id / 2 : id * 3 + 1 }
  next.catch { error in showError(error) }
}
