// The CLI's requests: status for anyone, pause, resume and priority for a
// job's owner or root, within the guests' priority limit.
#include "coord/coord_server.h"

#include "coord/status_report.h"

namespace msched {

void CoordServer::HandleControl(Conn& c, const proto::Control& m) {
  proto::ControlReply reply;
  if (m.op == proto::ControlOp::kStatus) {
    reply.ok = true;
    reply.text = StatusReport(scheduler_, {options_.socket_path, c.peer.uid, &wall_, WallNow()});
  } else {
    const Job* j = scheduler_.Find(m.job);
    Result<Commands> r = Status::NotFound("no job " + std::to_string(m.job));
    if (j != nullptr && j->state != JobState::kFinished) {
      if (c.peer.uid != 0 && c.peer.uid != j->uid) {
        r = Status::PermissionDenied("job " + std::to_string(m.job) + " belongs to uid " + std::to_string(j->uid) +
                                     "; only its owner or root may change it");
      } else if (m.op == proto::ControlOp::kPriority && !Privileged(c.peer.uid) &&
                 m.priority > options_.max_guest_priority) {
        r = Status::PermissionDenied("other users' jobs may have priority " +
                                     std::to_string(options_.max_guest_priority) +
                                     " at most on this coordinator (mschedd --max-guest-priority)");
      } else if (m.op == proto::ControlOp::kPause) {
        r = scheduler_.Pause(m.job);
      } else if (m.op == proto::ControlOp::kResume) {
        r = scheduler_.Resume(m.job);
      } else {
        r = scheduler_.SetPriority(m.job, m.priority);
      }
    }
    reply.ok = r.ok();
    if (r.ok()) {
      const char* verb = m.op == proto::ControlOp::kPause    ? "paused"
                         : m.op == proto::ControlOp::kResume ? "resumed"
                                                             : "reprioritised";
      reply.text = "job " + std::to_string(m.job) + " " + verb;
      Log(reply.text + " by " + Who(c.peer.uid, c.peer.pid));
      Apply(*r);
    } else {
      reply.text = r.status().message();
    }
  }
  (void)SendMessage(c.fd, reply);
  Close(c.fd, "request served");
}

}  // namespace msched
