#include "core/distributed/shaped_messages.h"

#include <cstdint>

namespace kiln {

namespace {

constexpr int64_t kHeader = 8;  // [dtype, ndim, sizes...]

}  // namespace

void start_shaped_send(Communicator& comm, const at::Tensor& tensor, int peer, ShapedTags tags,
                       std::vector<Communicator::Pending>& pending) {
  std::vector<int64_t> header(kHeader, 0);
  header[0] = static_cast<int64_t>(tensor.scalar_type());
  header[1] = tensor.dim();
  for (int64_t d = 0; d < tensor.dim(); ++d)
    header[2 + d] = tensor.size(d);
  pending.push_back(comm.start_send(at::tensor(header).to(tensor.device()), peer, tags.shape));
  pending.push_back(comm.start_send(tensor.contiguous(), peer, tags.data));
}

at::Tensor receive_shaped(Communicator& comm, int peer, ShapedTags tags, c10::Device device) {
  at::Tensor header = at::empty({kHeader}, at::TensorOptions().dtype(at::kLong).device(device));
  comm.start_recv(header, peer, tags.shape).wait();
  header = header.cpu();
  const int64_t* h = header.data_ptr<int64_t>();
  const std::vector<int64_t> sizes(h + 2, h + 2 + h[1]);
  const auto dtype = static_cast<at::ScalarType>(h[0]);
  at::Tensor tensor = at::empty(sizes, at::TensorOptions().dtype(dtype).device(device));
  comm.start_recv(tensor, peer, tags.data).wait();
  return tensor;
}

}  // namespace kiln
