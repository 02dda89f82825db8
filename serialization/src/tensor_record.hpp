#pragma once

// Private: tensor records on an open wire_writer / wire_reader, so that larger
// formats (checkpoints) embed tensors without an intermediate copy.

#include "asteroid/serialization/tensor_wire.hpp"
#include "wire_io.hpp"

namespace asteroid::serialization::detail {

void write_tensor_record(wire_writer& w, const torch::Tensor& t);
/// Reads one record; with `into`, writes the values into that tensor (which
/// must have the record's dtype and shape) instead of allocating. With
/// `must_end`, bytes after the record are an error, raised before writing.
torch::Tensor read_tensor_record(wire_reader& r, torch::Tensor* into = nullptr,
                                 bool must_end = false);

void write_named_record(wire_writer& w, const named_tensors& tensors);
named_tensors read_named_record(wire_reader& r);

} // namespace asteroid::serialization::detail
