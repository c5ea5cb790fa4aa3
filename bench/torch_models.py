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


def _stem_conv(old, cin, stride, padding):
    """old's Conv2d with cin input channels and the given stride/padding."""
    c = nn.Conv2d(cin, old.out_channels, old.kernel_size, stride, padding, bias=old.bias is not None)
    nn.init.kaiming_normal_(c.weight, mode="fan_out")
    if c.bias is not None:
        nn.init.zeros_(c.bias)
    return c


def efficientnet_b0(cin, classes, size):
    """torchvision's; below 64 px the stem and the first stride-2 block
    (features.2.0's depthwise conv) at stride 1, as Stoke builds it."""
    import torchvision
    m = torchvision.models.efficientnet_b0(num_classes=classes)
    small = size < 64
    if cin != 3 or small:
        m.features[0][0] = _stem_conv(m.features[0][0], cin, 1 if small else 2, 1)
    if small:
        m.features[2][0].block[1][0].stride = (1, 1)
    return m


def mobilenet_v3(cin, classes, size, large):
    """torchvision's; below 64 px the stem and the first stride-2 block's
    depthwise conv at stride 1."""
    import torchvision
    m = (torchvision.models.mobilenet_v3_large if large else torchvision.models.mobilenet_v3_small)(
        num_classes=classes)
    small = size < 64
    if cin != 3 or small:
        m.features[0][0] = _stem_conv(m.features[0][0], cin, 1 if small else 2, 1)
    if small:
        if large:
            m.features[2].block[1][0].stride = (1, 1)
        else:
            m.features[1].block[0][0].stride = (1, 1)
    return m


def convnext_tiny(cin, classes, size):
    """torchvision's; below 64 px the 4x4 stem at stride 2, padding 1."""
    import torchvision
    m = torchvision.models.convnext_tiny(num_classes=classes)
    small = size < 64
    if cin != 3 or small:
        c = nn.Conv2d(cin, 96, 4, 2 if small else 4, 1 if small else 0)
        nn.init.trunc_normal_(c.weight, std=0.02)
        nn.init.zeros_(c.bias)
        m.features[0][0] = c
    return m


def regnet_y_400mf(cin, classes, size):
    """torchvision's; below 64 px the stem and block1-0 at stride 1."""
    import torchvision
    m = torchvision.models.regnet_y_400mf(num_classes=classes)
    small = size < 64
    if cin != 3 or small:
        m.stem[0] = _stem_conv(m.stem[0], cin, 1 if small else 2, 1)
    if small:
        b = m.trunk_output.block1[0]
        b.proj[0].stride = (1, 1)
        b.f.b[0].stride = (1, 1)
    return m


def vit_tiny_patch(size):
    """Stoke's vit_tiny patch: the largest of 16, 8, 4, 2 leaving 7 or more per side."""
    for p in (16, 8, 4, 2):
        if size % p == 0 and size // p >= 7:
            return p
    raise ValueError(f"vit_tiny: no patch fits {size} px")


def vit(cin, classes, size, base):
    """torchvision's VisionTransformer: vit_b_16, or vit_tiny (timm's
    vit_tiny_patch16_224 sizes: 12 layers, 3 heads, 192 wide, MLP 768)."""
    from torchvision.models.vision_transformer import VisionTransformer
    if base:
        m = VisionTransformer(size, 16, 12, 12, 768, 3072, num_classes=classes)
    else:
        m = VisionTransformer(size, vit_tiny_patch(size), 12, 3, 192, 768, num_classes=classes)
    if cin != 3:
        old = m.conv_proj
        m.conv_proj = nn.Conv2d(cin, old.out_channels, old.kernel_size, old.stride)
        fan_in = m.conv_proj.in_channels * old.kernel_size[0] * old.kernel_size[1]
        nn.init.trunc_normal_(m.conv_proj.weight, std=(1.0 / fan_in) ** 0.5)
        nn.init.zeros_(m.conv_proj.bias)
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
    if name == "efficientnet_b0":
        return efficientnet_b0(cin, classes, size)
    if name in ("mobilenet_v3_small", "mobilenet_v3_large"):
        return mobilenet_v3(cin, classes, size, name.endswith("large"))
    if name == "convnext_tiny":
        return convnext_tiny(cin, classes, size)
    if name == "regnet_y_400mf":
        return regnet_y_400mf(cin, classes, size)
    if name in ("vit_b_16", "vit_tiny"):
        return vit(cin, classes, size, name == "vit_b_16")
    raise ValueError(name)


if __name__ == "__main__":
    for name, cin, classes, size in [("mlp", 1, 10, 28), ("cnn", 1, 10, 28), ("resnet8", 1, 10, 28),
                                     ("resnet18", 3, 10, 32), ("resnet18", 3, 1000, 224),
                                     ("resnet50", 3, 10, 32), ("mobilenet_v2", 3, 10, 32)]:
        m = make(name, cin, classes, size)
        n = sum(p.numel() for p in m.parameters())
        print(name, classes, size, "parameters", n, "state_dict entries", len(m.state_dict()))
