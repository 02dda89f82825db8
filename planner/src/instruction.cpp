#include "asteroid/planner/instruction.hpp"

#include <sstream>
#include <stdexcept>

namespace asteroid::planner {

std::string to_string(op kind) {
  switch (kind) {
    case op::load_micro_batch: return "LOAD";
    case op::forward: return "FWD";
    case op::send_activation: return "SEND_ACT";
    case op::recv_activation: return "RECV_ACT";
    case op::backward: return "BWD";
    case op::send_grad: return "SEND_GRAD";
    case op::recv_grad: return "RECV_GRAD";
    case op::all_reduce: return "ALLREDUCE";
    case op::optimizer_step: return "STEP";
  }
  return "?";
}

op parse_op(const std::string& mnemonic) {
  std::string known;
  for (size_t i = 0; i < num_ops; ++i) {
    auto kind = static_cast<op>(i);
    if (to_string(kind) == mnemonic)
      return kind;
    known += (known.empty() ? "" : ", ") + to_string(kind);
  }
  throw std::invalid_argument("unknown instruction '" + mnemonic
                              + "' (known: " + known + ")");
}

bool has_micro_batch(op kind) {
  return kind != op::all_reduce && kind != op::optimizer_step;
}

bool is_communication(op kind) {
  return kind == op::send_activation || kind == op::recv_activation ||
         kind == op::send_grad || kind == op::recv_grad;
}

std::string to_string(const instruction& instr) {
  std::string out = to_string(instr.kind);
  if (has_micro_batch(instr.kind))
    out += " mb=" + std::to_string(instr.micro_batch);
  if (instr.peer_stage >= 0) {
    bool outgoing =
        instr.kind == op::send_activation || instr.kind == op::send_grad;
    out += (outgoing ? " to=s" : " from=s") + std::to_string(instr.peer_stage);
  }
  return out;
}

namespace {

std::string owner(const instruction_stream& stream) {
  return "s" + std::to_string(stream.stage) + "r" +
         std::to_string(stream.replica) + ":";
}

} // namespace

std::string to_string(const instruction_stream& stream) {
  std::ostringstream out;
  auto prefix = owner(stream);
  for (const auto& instr : stream.instructions)
    out << prefix << ' ' << to_string(instr) << '\n';
  return out.str();
}

std::string to_compact_string(const instruction_stream& stream) {
  std::string out = owner(stream);
  for (const auto& instr : stream.instructions) {
    switch (instr.kind) {
      case op::forward: out += " F" + std::to_string(instr.micro_batch); break;
      case op::backward: out += " B" + std::to_string(instr.micro_batch); break;
      case op::all_reduce: out += " AR"; break;
      case op::optimizer_step: out += " STEP"; break;
      default: break;
    }
  }
  return out;
}

} // namespace asteroid::planner
