"""The Stoke model zoo in PyTorch: the same layouts, parameter names and
initialisation as engine/models.c, so that throughput and accuracy compare
like with like and checkpoints load both ways.

mlp, cnn and resnet8 use torch.nn's default initialisation; resnet18,
resnet34 and resnet50 are torchvision's (with the CIFAR stem for inputs
below 64 px: conv1 3x3 stride 1, no max-pool), mobilenet_v2 torchvision's
(below 64 px with features.0 and features.2 at stride 1), as Stoke builds
them.
"""
import torch
import torch.nn as nn


class BasicBlock(nn.Module):
    """torchvision's BasicBlock (conv1, bn1, conv2, bn2, downsample)."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                            nn.BatchNorm2d(cout))

    def forward(self, x):
        h = torch.relu(self.bn1(self.conv1(x)))
        h = self.bn2(self.conv2(h))
        return torch.relu(h + (self.downsample(x) if self.downsample is not None else x))


class MLP(nn.Module):
    def __init__(self, cin, classes, size):
        super().__init__()
        self.flatten = nn.Flatten()
        self.fc1 = nn.Linear(cin * size * size, 256)
        self.fc2 = nn.Linear(256, 128)
        self.fc3 = nn.Linear(128, classes)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(self.flatten(x))))))


class CNN(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, 32, 3, 1, 1, bias=False), nn.BatchNorm2d(32)
        self.conv2, self.bn2 = nn.Conv2d(32, 64, 3, 1, 1, bias=False), nn.BatchNorm2d(64)
        self.conv3, self.bn3 = nn.Conv2d(64, 128, 3, 1, 1, bias=False), nn.BatchNorm2d(128)
        self.fc = nn.Linear(128, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = torch.max_pool2d(torch.relu(self.bn2(self.conv2(x))), 2)
        x = torch.max_pool2d(torch.relu(self.bn3(self.conv3(x))), 2)
        return self.fc(x.mean((2, 3)))


class ResNet8(nn.Module):
    def __init__(self, cin, classes):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(cin, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16)
        self.layer1 = nn.Sequential(BasicBlock(16, 16, 1))
        self.layer2 = nn.Sequential(BasicBlock(16, 32, 2))
        self.layer3 = nn.Sequential(BasicBlock(32, 64, 2))
        self.fc = nn.Linear(64, classes)

    def forward(self, x):
        x = torch.relu(self.bn1(self.conv1(x)))
        x = self.layer3(self.layer2(self.layer1(x)))
        return self.fc(x.mean((2, 3)))


def resnet18(cin, classes, size):
    return torchvision_resnet("resnet18", cin, classes, size)


def torchvision_resnet(name, cin, classes, size):
    import torchvision
    m = getattr(torchvision.models, name)(num_classes=classes)
    if size < 64 or cin != 3:
        stride, k, pad = (1, 3, 1) if size < 64 else (2, 7, 3)
        m.conv1 = nn.Conv2d(cin, 64, k, stride, pad, bias=False)
        nn.init.kaiming_normal_(m.conv1.weight, mode="fan_out", nonlinearity="relu")
        if size < 64:
            m.maxpool = nn.Identity()
    return m


def mobilenet_v2(cin, classes, size):
    import torchvision
    m = torchvision.models.mobilenet_v2(num_classes=classes)
    if cin != 3 or size < 64:
        m.features[0][0] = nn.Conv2d(cin, 32, 3, 1 if size < 64 else 2, 1, bias=False)
        nn.init.kaiming_normal_(m.features[0][0].weight, mode="fan_out")
    if size < 64:
        m.features[2].conv[1][0].stride = (1, 1)  # the depthwise conv of the first stride-2 block
    return m


def make(name, cin, classes, size):
    if name == "mlp":
        return MLP(cin, classes, size)
    if name == "cnn":
        return CNN(cin, classes)
    if name == "resnet8":
        return ResNet8(cin, classes)
    if name in ("resnet18", "resnet34", "resnet50"):
        return torchvision_resnet(name, cin, classes, size)
    if name == "mobilenet_v2":
        return mobilenet_v2(cin, classes, size)
    raise ValueError(name)


if __name__ == "__main__":
    for name, cin, classes, size in [("mlp", 1, 10, 28), ("cnn", 1, 10, 28), ("resnet8", 1, 10, 28),
                                     ("resnet18", 3, 10, 32), ("resnet18", 3, 1000, 224),
                                     ("resnet50", 3, 10, 32), ("mobilenet_v2", 3, 10, 32)]:
        m = make(name, cin, classes, size)
        n = sum(p.numel() for p in m.parameters())
        print(name, classes, size, "parameters", n, "state_dict entries", len(m.state_dict()))
