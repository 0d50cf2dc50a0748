"""Small configurations of the models the tests export, plan and train (CI runs on 2 cores)."""
import torch
import torch.nn as nn
import torchvision

from gpt2 import GPT2, example, lm_loss


class SmallCNN(nn.Module):
    """Convolution, batch norm, ReLU, pooling, dropout and a linear head: every kind of node the
    exporter treats specially (multi-output ops, mutated buffers, views, a random op)."""

    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
                                  nn.MaxPool2d(2), nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32),
                                  nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Dropout(0.2))
        self.head = nn.Linear(32, 10)

    def forward(self, x):
        return self.head(self.body(x))


def image_case(model, batch, size, classes=1000, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(batch, 3, size, size, generator=g)
    y = torch.randint(0, classes, (batch,), generator=g)
    return model, (x,), (y,), None


def small_cnn():
    torch.manual_seed(0)
    return image_case(SmallCNN(), 16, 64, classes=10)


def resnet18(batch=2, size=64):
    torch.manual_seed(0)
    return image_case(torchvision.models.resnet18(), batch, size)


def mobilenet_v2(batch=2, size=64):
    torch.manual_seed(0)
    return image_case(torchvision.models.mobilenet_v2(), batch, size)


def tiny_gpt2(dropout=0.1, batch=2, seq=128):
    torch.manual_seed(0)
    m = GPT2(vocab=2000, ctx=256, d=128, layers=2, heads=4, dropout=dropout)
    x, y = example(batch, seq, vocab=2000)
    return m, (x,), (y,), lm_loss
