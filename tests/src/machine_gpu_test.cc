#include "base/machine_gpu.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace msched {
namespace {

namespace fs = std::filesystem;

// A stand-in for /proc/driver/nvidia/gpus: one folder per bus id.
class MachineGpuTest : public ::testing::Test {
 protected:
  void SetUp() override { fs::create_directories(root_); }
  void TearDown() override { fs::remove_all(root_); }
  void List(const std::string& bus_id) {
    fs::create_directories(root_ + "/" + bus_id);
    std::ofstream(root_ + "/" + bus_id + "/information") << "Bus Location: \t " << bus_id << "\n";
  }
  const std::string root_ = testing::TempDir() + "machine_gpu_" + std::to_string(getpid());
};

// nvidia-smi numbers GPUs in bus id order, whatever CUDA calls them.
TEST_F(MachineGpuTest, TheModulesListInBusOrderNamesTheGpu) {
  for (const char* bus : {"0000:c1:00.0", "0000:41:00.0", "0000:81:00.0", "0001:01:00.0"}) List(bus);
  // Device 0 of a process that sees only that GPU is still GPU 2.
  EXPECT_EQ(*MachineGpuIndex(0, "0000:C1:00.0", "1", root_), 2) << "the module outranks CUDA_VISIBLE_DEVICES";
  EXPECT_EQ(*MachineGpuIndex(0, "00000000:41:00.0", nullptr, root_), 0) << "NVML's eight-digit domain";
  EXPECT_EQ(*MachineGpuIndex(0, "0001:01:00.0\n", "GPU-8f6e", root_), 3) << "UUIDs do not matter then";
}

TEST_F(MachineGpuTest, WithoutTheModuleCudaVisibleDevicesMapsTheOrdinal) {
  List("0000:41:00.0");
  EXPECT_EQ(*MachineGpuIndex(1, "0000:81:00.0", "2, 3", root_), 3) << "a device the module does not list";
  EXPECT_EQ(*MachineGpuIndex(0, "0000:c1:00.0", "2,3", root_), 2);
  EXPECT_EQ(*MachineGpuIndex(0, "", "5,GPU-8f6e", root_), 5) << "entries after the device do not matter";
  EXPECT_EQ(*MachineGpuIndex(4, "", nullptr, root_), 4) << "unset: every GPU, in the machine's order";
}

TEST_F(MachineGpuTest, AGpuNamedByUuidOrBeyondTheListIsNotGuessed) {
  const Result<int> uuid = MachineGpuIndex(1, "", "GPU-8f6e,1", root_);
  ASSERT_FALSE(uuid.ok());
  EXPECT_NE(uuid.status().message().find("'GPU-8f6e'"), std::string::npos) << uuid.status().message();
  const Result<int> beyond = MachineGpuIndex(2, "", "0,1", root_);
  ASSERT_FALSE(beyond.ok());
  EXPECT_NE(beyond.status().message().find("beyond"), std::string::npos) << beyond.status().message();
  EXPECT_FALSE(MachineGpuIndex(0, "", "", root_).ok());
}

TEST(LeadingGpuIndicesTest, ListsTheIndicesBeforeAnythingElse) {
  EXPECT_EQ(*LeadingGpuIndices("2,0 , 7"), (std::vector<int>{2, 0, 7}));
  EXPECT_EQ(*LeadingGpuIndices("1,GPU-8f6e,3"), (std::vector<int>{1})) << "as the driver reads on from there";
  EXPECT_EQ(*LeadingGpuIndices("0,,1"), (std::vector<int>{0}));
  EXPECT_TRUE(LeadingGpuIndices("MIG-1a2b,0")->empty());
  EXPECT_TRUE(LeadingGpuIndices("")->empty());
  EXPECT_TRUE(LeadingGpuIndices("+1")->empty()) << "digits only, as the simulator reads it too";
  EXPECT_FALSE(LeadingGpuIndices(nullptr).ok());
}

}  // namespace
}  // namespace msched
