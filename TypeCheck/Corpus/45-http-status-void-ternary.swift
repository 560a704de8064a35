// HTTP response as a value (statusCode == 200 && !body.isEmpty), then a Void step that is a ternary of calls.
import PromiseHTTP
import Promises

func chain_45() {
  client.get("health")
    .map { response in response.statusCode == 200 && !response.body.isEmpty }
    .done { healthy in healthy ? log("up") : log("down") }
    .catch { error in showError(error) }
}
