#include "client/order_runner.h"

#include <optional>
#include <utility>

namespace msched::hook {

void OrderRunner::Push(proto::Message m) {
  queue_.push_back(std::move(m));
  pending_.store(true, std::memory_order_release);
}

void OrderRunner::Clear() {
  queue_.clear();
  pending_.store(false, std::memory_order_release);
}

void OrderRunner::RunQueued() {
  while (!queue_.empty()) {
    // order_mu() is taken before the order is: threads that carry orders
    // out run them in the order sent.
    side_.mu().Unlock();
    side_.order_mu().Lock();
    side_.mu().Lock();
    std::optional<proto::Message> m;
    if (!queue_.empty()) {
      m = std::move(queue_.front());
      queue_.pop_front();
    }
    side_.mu().Unlock();
    if (m) handler_.Execute(*m);
    side_.order_mu().Unlock();
    side_.mu().Lock();
  }
  pending_.store(false, std::memory_order_release);
}

}  // namespace msched::hook
