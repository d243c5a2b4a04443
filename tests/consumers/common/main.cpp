// What every consumer project builds: a 2-rank all_reduce and one DDP step
// (with second.cpp, a second file that includes ddp).
#include <ddp/ddp.hpp>

#include <cstdio>

int world_size_from_a_second_file(ddp::process_group<ddp::gloo>& pg); // second.cpp

struct tiny_model {
  std::vector<float> w{1, 2, 3}, dw{0, 0, 0};
  template <class F> void for_each_parameter(F&& f) { f("w", w, dw); }
};

int main() {
  auto pg = ddp::init_process_group<ddp::gloo>();
  std::vector<double> v{1.0 * pg.rank(), 1.0};
  pg.all_reduce(v);
  const double want = pg.size() * (pg.size() - 1) / 2.0;
  tiny_model m;
  ddp::distributed_data_parallel dp(m, pg);
  for (auto& g : m.dw)
    g = static_cast<float>(pg.rank() + 1);
  dp.synchronize();
  const float mean = static_cast<float>(pg.size() + 1) / 2.0f;
  const bool ok =
      v[0] == want && v[1] == pg.size() && m.dw[2] == mean && world_size_from_a_second_file(pg) == pg.size();
  std::printf("consumer rank %d/%d ddp %s: %s\n", pg.rank(), pg.size(),
              std::string(ddp::version().string).c_str(), ok ? "ok" : "WRONG");
  return ok ? 0 : 1;
}
