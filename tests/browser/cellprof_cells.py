"""The LeNet training cell both %%nbprofiler profile tests run (MindSpore CPU build, PyNative)."""

LENET_CELL = '''
import numpy as np, mindspore as ms, mindspore.dataset as ds
from mindspore import nn
ms.set_context(mode=ms.PYNATIVE_MODE); ms.set_device("CPU")
def gen():
    rng = np.random.default_rng(0)
    for i in range(STEPS * 32):
        yield rng.random((1, 32, 32), dtype=np.float32), np.array(i % 10, dtype=np.int32)
class LeNet(nn.Cell):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 6, 5, pad_mode="valid"); self.conv2 = nn.Conv2d(6, 16, 5, pad_mode="valid")
        self.relu = nn.ReLU(); self.pool = nn.MaxPool2d(2, 2); self.flat = nn.Flatten()
        self.fc1 = nn.Dense(16 * 5 * 5, 120); self.fc2 = nn.Dense(120, 84); self.fc3 = nn.Dense(84, 10)
    def construct(self, x):
        x = self.pool(self.relu(self.conv1(x))); x = self.pool(self.relu(self.conv2(x)))
        x = self.flat(x); x = self.relu(self.fc1(x)); x = self.relu(self.fc2(x)); return self.fc3(x)
data = ds.GeneratorDataset(gen, ["image", "label"], shuffle=False)
data = data.map(operations=[lambda x: x * 2.0], input_columns="image").batch(32, drop_remainder=True)
net = LeNet()
model = ms.train.Model(net, nn.SoftmaxCrossEntropyWithLogits(sparse=True, reduction="mean"),
                       nn.Momentum(net.trainable_params(), 0.01, 0.9))
model.train(1, data, dataset_sink_mode=False)
'''
