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

TEST(VisibleGpuIndicesTest, ListsTheIndicesBeforeAnythingElse) {
  const std::optional<int> unknown;
  EXPECT_EQ(*VisibleGpuIndices("2,0 , 7", unknown), (std::vector<int>{2, 0, 7}));
  EXPECT_EQ(*VisibleGpuIndices("1,GPU-8f6e,3", unknown), (std::vector<int>{1})) << "as the driver reads on from there";
  EXPECT_EQ(*VisibleGpuIndices("0,,1", unknown), (std::vector<int>{0}));
  EXPECT_TRUE(VisibleGpuIndices("MIG-1a2b,0", unknown)->empty());
  EXPECT_TRUE(VisibleGpuIndices("", unknown)->empty());
  EXPECT_TRUE(VisibleGpuIndices("+1", unknown)->empty()) << "digits only, as the simulator reads it too";
  EXPECT_EQ(*VisibleGpuIndices("1,0,1,2", unknown), (std::vector<int>{1, 0})) << "a GPU named twice ends the list";
  EXPECT_FALSE(VisibleGpuIndices(nullptr, unknown).ok());
}

// On a node of two GPUs, CUDA_VISIBLE_DEVICES=0,...,11 names two GPUs, not
// twelve (one coordinator each): the driver ends the list at the first index
// the machine has no GPU for.
TEST(VisibleGpuIndicesTest, TheListEndsAtTheFirstGpuTheMachineLacks) {
  EXPECT_EQ(*VisibleGpuIndices("0,1,2,3,4,5,6,7,8,9,10,11", 2), (std::vector<int>{0, 1}));
  EXPECT_EQ(*VisibleGpuIndices("1,5,0", 2), (std::vector<int>{1})) << "GPU 0 comes after the end";
  EXPECT_TRUE(VisibleGpuIndices("1023", 8)->empty());
  EXPECT_EQ(*VisibleGpuIndices("7,3", 8), (std::vector<int>{7, 3}));
}

TEST_F(MachineGpuTest, TheMachinesGpusAreTheModulesOrTheSimulatedNodes) {
  EXPECT_EQ(MachineGpuCount(nullptr, root_), std::nullopt) << "the module lists none: not known";
  EXPECT_EQ(MachineGpuCount(nullptr, root_ + "/absent"), std::nullopt);
  for (const char* bus : {"0000:c1:00.0", "0000:41:00.0", "0000:81:00.0"}) List(bus);
  EXPECT_EQ(MachineGpuCount(nullptr, root_), 3);
  EXPECT_EQ(MachineGpuCount("2", root_), 2) << "the simulator is the driver";
  EXPECT_EQ(MachineGpuCount("", root_), 3) << "MSIM_GPUS empty or no count: the module's";
  EXPECT_EQ(MachineGpuCount("0", root_), 3);
  EXPECT_EQ(MachineGpuCount("16", root_ + "/absent"), 16);
}

}  // namespace
}  // namespace msched
